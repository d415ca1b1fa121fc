/* opcodes.h: the CPython 3.11 opcode table, one X-macro list (ORDER: opcode number).
 *
 * Includes CPython's <opcode.h>, so its macros (LOAD_FAST, HAVE_ARGUMENT, ...) stay usable,
 * and adds one list from which the engine derives names and cache sizes:
 *
 *   CDYN_OPCODES(X)              X(NAME, number, cache_units) for every base 3.11 opcode,
 *                                CACHE and EXTENDED_ARG included. cache_units is the number
 *                                of 16-bit CACHE units that follow the instruction in co_code.
 *   CDYN_SPECIALIZED_OPCODES(X)  X(NAME, BASE) for the adaptive/specialised forms that only
 *                                appear in the live (quickened) bytecode; never in co_code.
 *
 * The numbers are checked against <opcode.h> at compile time (bytecode.c). Data source:
 * Lib/opcode.py of CPython 3.11.7 (opmap, _inline_cache_entries, _specializations).
 *
 * A code unit: low byte opcode, high byte oparg (little-endian _Py_CODEUNIT).
 * Up to three EXTENDED_ARG units prefix an instruction whose oparg exceeds 8 bits; each
 * contributes the next higher byte. CACHE units (opcode 0) follow some instructions and are
 * zero in de-specialised bytecode.
 */
#ifndef CDYN_OPCODES_H
#define CDYN_OPCODES_H
#include <opcode.h>

/* ORDER OP */
#define CDYN_OPCODES(X) \
    X(CACHE,                           0,  0) \
    X(POP_TOP,                         1,  0) \
    X(PUSH_NULL,                       2,  0) \
    X(NOP,                             9,  0) \
    X(UNARY_POSITIVE,                 10,  0) \
    X(UNARY_NEGATIVE,                 11,  0) \
    X(UNARY_NOT,                      12,  0) \
    X(UNARY_INVERT,                   15,  0) \
    X(BINARY_SUBSCR,                  25,  4) \
    X(GET_LEN,                        30,  0) \
    X(MATCH_MAPPING,                  31,  0) \
    X(MATCH_SEQUENCE,                 32,  0) \
    X(MATCH_KEYS,                     33,  0) \
    X(PUSH_EXC_INFO,                  35,  0) \
    X(CHECK_EXC_MATCH,                36,  0) \
    X(CHECK_EG_MATCH,                 37,  0) \
    X(WITH_EXCEPT_START,              49,  0) \
    X(GET_AITER,                      50,  0) \
    X(GET_ANEXT,                      51,  0) \
    X(BEFORE_ASYNC_WITH,              52,  0) \
    X(BEFORE_WITH,                    53,  0) \
    X(END_ASYNC_FOR,                  54,  0) \
    X(STORE_SUBSCR,                   60,  1) \
    X(DELETE_SUBSCR,                  61,  0) \
    X(GET_ITER,                       68,  0) \
    X(GET_YIELD_FROM_ITER,            69,  0) \
    X(PRINT_EXPR,                     70,  0) \
    X(LOAD_BUILD_CLASS,               71,  0) \
    X(LOAD_ASSERTION_ERROR,           74,  0) \
    X(RETURN_GENERATOR,               75,  0) \
    X(LIST_TO_TUPLE,                  82,  0) \
    X(RETURN_VALUE,                   83,  0) \
    X(IMPORT_STAR,                    84,  0) \
    X(SETUP_ANNOTATIONS,              85,  0) \
    X(YIELD_VALUE,                    86,  0) \
    X(ASYNC_GEN_WRAP,                 87,  0) \
    X(PREP_RERAISE_STAR,              88,  0) \
    X(POP_EXCEPT,                     89,  0) \
    X(STORE_NAME,                     90,  0) \
    X(DELETE_NAME,                    91,  0) \
    X(UNPACK_SEQUENCE,                92,  1) \
    X(FOR_ITER,                       93,  0) \
    X(UNPACK_EX,                      94,  0) \
    X(STORE_ATTR,                     95,  4) \
    X(DELETE_ATTR,                    96,  0) \
    X(STORE_GLOBAL,                   97,  0) \
    X(DELETE_GLOBAL,                  98,  0) \
    X(SWAP,                           99,  0) \
    X(LOAD_CONST,                    100,  0) \
    X(LOAD_NAME,                     101,  0) \
    X(BUILD_TUPLE,                   102,  0) \
    X(BUILD_LIST,                    103,  0) \
    X(BUILD_SET,                     104,  0) \
    X(BUILD_MAP,                     105,  0) \
    X(LOAD_ATTR,                     106,  4) \
    X(COMPARE_OP,                    107,  2) \
    X(IMPORT_NAME,                   108,  0) \
    X(IMPORT_FROM,                   109,  0) \
    X(JUMP_FORWARD,                  110,  0) \
    X(JUMP_IF_FALSE_OR_POP,          111,  0) \
    X(JUMP_IF_TRUE_OR_POP,           112,  0) \
    X(POP_JUMP_FORWARD_IF_FALSE,     114,  0) \
    X(POP_JUMP_FORWARD_IF_TRUE,      115,  0) \
    X(LOAD_GLOBAL,                   116,  5) \
    X(IS_OP,                         117,  0) \
    X(CONTAINS_OP,                   118,  0) \
    X(RERAISE,                       119,  0) \
    X(COPY,                          120,  0) \
    X(BINARY_OP,                     122,  1) \
    X(SEND,                          123,  0) \
    X(LOAD_FAST,                     124,  0) \
    X(STORE_FAST,                    125,  0) \
    X(DELETE_FAST,                   126,  0) \
    X(POP_JUMP_FORWARD_IF_NOT_NONE,  128,  0) \
    X(POP_JUMP_FORWARD_IF_NONE,      129,  0) \
    X(RAISE_VARARGS,                 130,  0) \
    X(GET_AWAITABLE,                 131,  0) \
    X(MAKE_FUNCTION,                 132,  0) \
    X(BUILD_SLICE,                   133,  0) \
    X(JUMP_BACKWARD_NO_INTERRUPT,    134,  0) \
    X(MAKE_CELL,                     135,  0) \
    X(LOAD_CLOSURE,                  136,  0) \
    X(LOAD_DEREF,                    137,  0) \
    X(STORE_DEREF,                   138,  0) \
    X(DELETE_DEREF,                  139,  0) \
    X(JUMP_BACKWARD,                 140,  0) \
    X(CALL_FUNCTION_EX,              142,  0) \
    X(EXTENDED_ARG,                  144,  0) \
    X(LIST_APPEND,                   145,  0) \
    X(SET_ADD,                       146,  0) \
    X(MAP_ADD,                       147,  0) \
    X(LOAD_CLASSDEREF,               148,  0) \
    X(COPY_FREE_VARS,                149,  0) \
    X(RESUME,                        151,  0) \
    X(MATCH_CLASS,                   152,  0) \
    X(FORMAT_VALUE,                  155,  0) \
    X(BUILD_CONST_KEY_MAP,           156,  0) \
    X(BUILD_STRING,                  157,  0) \
    X(LOAD_METHOD,                   160, 10) \
    X(LIST_EXTEND,                   162,  0) \
    X(SET_UPDATE,                    163,  0) \
    X(DICT_MERGE,                    164,  0) \
    X(DICT_UPDATE,                   165,  0) \
    X(PRECALL,                       166,  1) \
    X(CALL,                          171,  4) \
    X(KW_NAMES,                      172,  0) \
    X(POP_JUMP_BACKWARD_IF_NOT_NONE, 173,  0) \
    X(POP_JUMP_BACKWARD_IF_NONE,     174,  0) \
    X(POP_JUMP_BACKWARD_IF_FALSE,    175,  0) \
    X(POP_JUMP_BACKWARD_IF_TRUE,     176,  0)

#define CDYN_SPECIALIZED_OPCODES(X) \
    X(BINARY_OP_ADAPTIVE,                           BINARY_OP) \
    X(BINARY_OP_ADD_FLOAT,                          BINARY_OP) \
    X(BINARY_OP_ADD_INT,                            BINARY_OP) \
    X(BINARY_OP_ADD_UNICODE,                        BINARY_OP) \
    X(BINARY_OP_INPLACE_ADD_UNICODE,                BINARY_OP) \
    X(BINARY_OP_MULTIPLY_FLOAT,                     BINARY_OP) \
    X(BINARY_OP_MULTIPLY_INT,                       BINARY_OP) \
    X(BINARY_OP_SUBTRACT_FLOAT,                     BINARY_OP) \
    X(BINARY_OP_SUBTRACT_INT,                       BINARY_OP) \
    X(BINARY_SUBSCR_ADAPTIVE,                       BINARY_SUBSCR) \
    X(BINARY_SUBSCR_DICT,                           BINARY_SUBSCR) \
    X(BINARY_SUBSCR_GETITEM,                        BINARY_SUBSCR) \
    X(BINARY_SUBSCR_LIST_INT,                       BINARY_SUBSCR) \
    X(BINARY_SUBSCR_TUPLE_INT,                      BINARY_SUBSCR) \
    X(CALL_ADAPTIVE,                                CALL) \
    X(CALL_PY_EXACT_ARGS,                           CALL) \
    X(CALL_PY_WITH_DEFAULTS,                        CALL) \
    X(COMPARE_OP_ADAPTIVE,                          COMPARE_OP) \
    X(COMPARE_OP_FLOAT_JUMP,                        COMPARE_OP) \
    X(COMPARE_OP_INT_JUMP,                          COMPARE_OP) \
    X(COMPARE_OP_STR_JUMP,                          COMPARE_OP) \
    X(EXTENDED_ARG_QUICK,                           EXTENDED_ARG) \
    X(JUMP_BACKWARD_QUICK,                          JUMP_BACKWARD) \
    X(LOAD_ATTR_ADAPTIVE,                           LOAD_ATTR) \
    X(LOAD_ATTR_INSTANCE_VALUE,                     LOAD_ATTR) \
    X(LOAD_ATTR_MODULE,                             LOAD_ATTR) \
    X(LOAD_ATTR_SLOT,                               LOAD_ATTR) \
    X(LOAD_ATTR_WITH_HINT,                          LOAD_ATTR) \
    X(LOAD_CONST__LOAD_FAST,                        LOAD_CONST) \
    X(LOAD_FAST__LOAD_CONST,                        LOAD_FAST) \
    X(LOAD_FAST__LOAD_FAST,                         LOAD_FAST) \
    X(LOAD_GLOBAL_ADAPTIVE,                         LOAD_GLOBAL) \
    X(LOAD_GLOBAL_BUILTIN,                          LOAD_GLOBAL) \
    X(LOAD_GLOBAL_MODULE,                           LOAD_GLOBAL) \
    X(LOAD_METHOD_ADAPTIVE,                         LOAD_METHOD) \
    X(LOAD_METHOD_CLASS,                            LOAD_METHOD) \
    X(LOAD_METHOD_MODULE,                           LOAD_METHOD) \
    X(LOAD_METHOD_NO_DICT,                          LOAD_METHOD) \
    X(LOAD_METHOD_WITH_DICT,                        LOAD_METHOD) \
    X(LOAD_METHOD_WITH_VALUES,                      LOAD_METHOD) \
    X(PRECALL_ADAPTIVE,                             PRECALL) \
    X(PRECALL_BOUND_METHOD,                         PRECALL) \
    X(PRECALL_BUILTIN_CLASS,                        PRECALL) \
    X(PRECALL_BUILTIN_FAST_WITH_KEYWORDS,           PRECALL) \
    X(PRECALL_METHOD_DESCRIPTOR_FAST_WITH_KEYWORDS, PRECALL) \
    X(PRECALL_NO_KW_BUILTIN_FAST,                   PRECALL) \
    X(PRECALL_NO_KW_BUILTIN_O,                      PRECALL) \
    X(PRECALL_NO_KW_ISINSTANCE,                     PRECALL) \
    X(PRECALL_NO_KW_LEN,                            PRECALL) \
    X(PRECALL_NO_KW_LIST_APPEND,                    PRECALL) \
    X(PRECALL_NO_KW_METHOD_DESCRIPTOR_FAST,         PRECALL) \
    X(PRECALL_NO_KW_METHOD_DESCRIPTOR_NOARGS,       PRECALL) \
    X(PRECALL_NO_KW_METHOD_DESCRIPTOR_O,            PRECALL) \
    X(PRECALL_NO_KW_STR_1,                          PRECALL) \
    X(PRECALL_NO_KW_TUPLE_1,                        PRECALL) \
    X(PRECALL_NO_KW_TYPE_1,                         PRECALL) \
    X(PRECALL_PYFUNC,                               PRECALL) \
    X(RESUME_QUICK,                                 RESUME) \
    X(STORE_ATTR_ADAPTIVE,                          STORE_ATTR) \
    X(STORE_ATTR_INSTANCE_VALUE,                    STORE_ATTR) \
    X(STORE_ATTR_SLOT,                              STORE_ATTR) \
    X(STORE_ATTR_WITH_HINT,                         STORE_ATTR) \
    X(STORE_FAST__LOAD_FAST,                        STORE_FAST) \
    X(STORE_FAST__STORE_FAST,                       STORE_FAST) \
    X(STORE_SUBSCR_ADAPTIVE,                        STORE_SUBSCR) \
    X(STORE_SUBSCR_DICT,                            STORE_SUBSCR) \
    X(STORE_SUBSCR_LIST_INT,                        STORE_SUBSCR) \
    X(UNPACK_SEQUENCE_ADAPTIVE,                     UNPACK_SEQUENCE) \
    X(UNPACK_SEQUENCE_LIST,                         UNPACK_SEQUENCE) \
    X(UNPACK_SEQUENCE_TUPLE,                        UNPACK_SEQUENCE) \
    X(UNPACK_SEQUENCE_TWO_TUPLE,                    UNPACK_SEQUENCE)

/* Name of opcode op: a static string (never freed), or NULL when op is no 3.11 opcode.
 * Specialised opcodes give their own names. */
const char *cdyn_opname(int op);

/* 1 when op is a base 3.11 opcode (one that may appear in co_code), else 0. */
int cdyn_opcode_known(int op);

/* Base opcode of a specialised opcode (e.g. LOAD_ATTR_SLOT -> LOAD_ATTR); a base opcode maps
 * to itself; -1 for unknown numbers. */
int cdyn_opcode_deopt(int op);

#endif
