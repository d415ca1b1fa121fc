/* opcodes.h: the opcode tables of the bytecode layer, for CPython 3.11, 3.12 and 3.13.
 *
 * The engine names operations by one enum, `cdyn_op` (the union of the three versions' real
 * opcodes, CDYN_OPS), never by CPython's numbers: <opcode.h> is not included (its macros would
 * clash with these names), so an opcode handler, a code generator or an analysis reads the
 * same names on every Python. Only the bytecode layer (bytecode.c) sees CPython's numbers,
 * through the running version's table CDYN_NATIVE_OPS (selected below: the only version
 * test in this header), and translates both ways:
 *
 *   decode:   native number -> cdyn_op, then the version's normalisations (bytecode.c,
 *             "normal form"), so that every version reads alike to the interpreter
 *   assemble: the reverse, then CPython's numbers and cache sizes
 *
 * The tables come from Lib/opcode.py (opmap and the inline cache counts) of CPython 3.11.7,
 * 3.12.1 and 3.13.0; opcode numbers are fixed within a minor version. A real opcode that the
 * running version lacks has no native number there (cdyn_op_native gives -1).
 * opcodes_check.c compares the running version's table with <opcode.h> at compile time.
 *
 * A code unit: low byte opcode, high byte oparg (little-endian _Py_CODEUNIT). Up to three
 * EXTENDED_ARG units prefix an instruction whose oparg exceeds 8 bits; CACHE units (opcode 0)
 * follow some instructions, zero in de-specialised bytecode (the code object's co_code).
 *
 * Adding a Python version (3.14: see the README's section on versions): its table here,
 * its normal-form rules in bytecode.c, its frame layout in frame.h.
 */
#ifndef CDYN_OPCODES_H
#define CDYN_OPCODES_H

/* The union of the real opcodes of CPython 3.11, 3.12 and 3.13 (Lib/opcode.py of 3.11.7,
 * 3.12.1 and 3.13.0), CACHE and EXTENDED_ARG included: one name per operation, in the
 * order first seen (3.11's, then 3.12's additions, then 3.13's). */
#define CDYN_OPS(X) \
    X(CACHE) \
    X(POP_TOP) \
    X(PUSH_NULL) \
    X(NOP) \
    X(UNARY_POSITIVE) \
    X(UNARY_NEGATIVE) \
    X(UNARY_NOT) \
    X(UNARY_INVERT) \
    X(BINARY_SUBSCR) \
    X(GET_LEN) \
    X(MATCH_MAPPING) \
    X(MATCH_SEQUENCE) \
    X(MATCH_KEYS) \
    X(PUSH_EXC_INFO) \
    X(CHECK_EXC_MATCH) \
    X(CHECK_EG_MATCH) \
    X(WITH_EXCEPT_START) \
    X(GET_AITER) \
    X(GET_ANEXT) \
    X(BEFORE_ASYNC_WITH) \
    X(BEFORE_WITH) \
    X(END_ASYNC_FOR) \
    X(STORE_SUBSCR) \
    X(DELETE_SUBSCR) \
    X(GET_ITER) \
    X(GET_YIELD_FROM_ITER) \
    X(PRINT_EXPR) \
    X(LOAD_BUILD_CLASS) \
    X(LOAD_ASSERTION_ERROR) \
    X(RETURN_GENERATOR) \
    X(LIST_TO_TUPLE) \
    X(RETURN_VALUE) \
    X(IMPORT_STAR) \
    X(SETUP_ANNOTATIONS) \
    X(YIELD_VALUE) \
    X(ASYNC_GEN_WRAP) \
    X(PREP_RERAISE_STAR) \
    X(POP_EXCEPT) \
    X(STORE_NAME) \
    X(DELETE_NAME) \
    X(UNPACK_SEQUENCE) \
    X(FOR_ITER) \
    X(UNPACK_EX) \
    X(STORE_ATTR) \
    X(DELETE_ATTR) \
    X(STORE_GLOBAL) \
    X(DELETE_GLOBAL) \
    X(SWAP) \
    X(LOAD_CONST) \
    X(LOAD_NAME) \
    X(BUILD_TUPLE) \
    X(BUILD_LIST) \
    X(BUILD_SET) \
    X(BUILD_MAP) \
    X(LOAD_ATTR) \
    X(COMPARE_OP) \
    X(IMPORT_NAME) \
    X(IMPORT_FROM) \
    X(JUMP_FORWARD) \
    X(JUMP_IF_FALSE_OR_POP) \
    X(JUMP_IF_TRUE_OR_POP) \
    X(POP_JUMP_FORWARD_IF_FALSE) \
    X(POP_JUMP_FORWARD_IF_TRUE) \
    X(LOAD_GLOBAL) \
    X(IS_OP) \
    X(CONTAINS_OP) \
    X(RERAISE) \
    X(COPY) \
    X(BINARY_OP) \
    X(SEND) \
    X(LOAD_FAST) \
    X(STORE_FAST) \
    X(DELETE_FAST) \
    X(POP_JUMP_FORWARD_IF_NOT_NONE) \
    X(POP_JUMP_FORWARD_IF_NONE) \
    X(RAISE_VARARGS) \
    X(GET_AWAITABLE) \
    X(MAKE_FUNCTION) \
    X(BUILD_SLICE) \
    X(JUMP_BACKWARD_NO_INTERRUPT) \
    X(MAKE_CELL) \
    X(LOAD_CLOSURE) \
    X(LOAD_DEREF) \
    X(STORE_DEREF) \
    X(DELETE_DEREF) \
    X(JUMP_BACKWARD) \
    X(CALL_FUNCTION_EX) \
    X(EXTENDED_ARG) \
    X(LIST_APPEND) \
    X(SET_ADD) \
    X(MAP_ADD) \
    X(LOAD_CLASSDEREF) \
    X(COPY_FREE_VARS) \
    X(RESUME) \
    X(MATCH_CLASS) \
    X(FORMAT_VALUE) \
    X(BUILD_CONST_KEY_MAP) \
    X(BUILD_STRING) \
    X(LOAD_METHOD) \
    X(LIST_EXTEND) \
    X(SET_UPDATE) \
    X(DICT_MERGE) \
    X(DICT_UPDATE) \
    X(PRECALL) \
    X(CALL) \
    X(KW_NAMES) \
    X(POP_JUMP_BACKWARD_IF_NOT_NONE) \
    X(POP_JUMP_BACKWARD_IF_NONE) \
    X(POP_JUMP_BACKWARD_IF_FALSE) \
    X(POP_JUMP_BACKWARD_IF_TRUE) \
    X(END_FOR) \
    X(END_SEND) \
    X(BINARY_SLICE) \
    X(STORE_SLICE) \
    X(CLEANUP_THROW) \
    X(LOAD_LOCALS) \
    X(POP_JUMP_IF_FALSE) \
    X(POP_JUMP_IF_TRUE) \
    X(RETURN_CONST) \
    X(LOAD_FAST_CHECK) \
    X(POP_JUMP_IF_NOT_NONE) \
    X(POP_JUMP_IF_NONE) \
    X(LOAD_SUPER_ATTR) \
    X(LOAD_FAST_AND_CLEAR) \
    X(CALL_INTRINSIC_1) \
    X(CALL_INTRINSIC_2) \
    X(LOAD_FROM_DICT_OR_GLOBALS) \
    X(LOAD_FROM_DICT_OR_DEREF) \
    X(EXIT_INIT_CHECK) \
    X(FORMAT_SIMPLE) \
    X(FORMAT_WITH_SPEC) \
    X(TO_BOOL) \
    X(CALL_KW) \
    X(CONVERT_VALUE) \
    X(LOAD_FAST_LOAD_FAST) \
    X(SET_FUNCTION_ATTRIBUTE) \
    X(STORE_FAST_LOAD_FAST) \
    X(STORE_FAST_STORE_FAST)

/* CPython 3.11.7: X(NAME, number, cache units). */
#define CDYN_NATIVE_OPS_311(X) \
    X(CACHE,                            0, 0) \
    X(POP_TOP,                          1, 0) \
    X(PUSH_NULL,                        2, 0) \
    X(NOP,                              9, 0) \
    X(UNARY_POSITIVE,                  10, 0) \
    X(UNARY_NEGATIVE,                  11, 0) \
    X(UNARY_NOT,                       12, 0) \
    X(UNARY_INVERT,                    15, 0) \
    X(BINARY_SUBSCR,                   25, 4) \
    X(GET_LEN,                         30, 0) \
    X(MATCH_MAPPING,                   31, 0) \
    X(MATCH_SEQUENCE,                  32, 0) \
    X(MATCH_KEYS,                      33, 0) \
    X(PUSH_EXC_INFO,                   35, 0) \
    X(CHECK_EXC_MATCH,                 36, 0) \
    X(CHECK_EG_MATCH,                  37, 0) \
    X(WITH_EXCEPT_START,               49, 0) \
    X(GET_AITER,                       50, 0) \
    X(GET_ANEXT,                       51, 0) \
    X(BEFORE_ASYNC_WITH,               52, 0) \
    X(BEFORE_WITH,                     53, 0) \
    X(END_ASYNC_FOR,                   54, 0) \
    X(STORE_SUBSCR,                    60, 1) \
    X(DELETE_SUBSCR,                   61, 0) \
    X(GET_ITER,                        68, 0) \
    X(GET_YIELD_FROM_ITER,             69, 0) \
    X(PRINT_EXPR,                      70, 0) \
    X(LOAD_BUILD_CLASS,                71, 0) \
    X(LOAD_ASSERTION_ERROR,            74, 0) \
    X(RETURN_GENERATOR,                75, 0) \
    X(LIST_TO_TUPLE,                   82, 0) \
    X(RETURN_VALUE,                    83, 0) \
    X(IMPORT_STAR,                     84, 0) \
    X(SETUP_ANNOTATIONS,               85, 0) \
    X(YIELD_VALUE,                     86, 0) \
    X(ASYNC_GEN_WRAP,                  87, 0) \
    X(PREP_RERAISE_STAR,               88, 0) \
    X(POP_EXCEPT,                      89, 0) \
    X(STORE_NAME,                      90, 0) \
    X(DELETE_NAME,                     91, 0) \
    X(UNPACK_SEQUENCE,                 92, 1) \
    X(FOR_ITER,                        93, 0) \
    X(UNPACK_EX,                       94, 0) \
    X(STORE_ATTR,                      95, 4) \
    X(DELETE_ATTR,                     96, 0) \
    X(STORE_GLOBAL,                    97, 0) \
    X(DELETE_GLOBAL,                   98, 0) \
    X(SWAP,                            99, 0) \
    X(LOAD_CONST,                     100, 0) \
    X(LOAD_NAME,                      101, 0) \
    X(BUILD_TUPLE,                    102, 0) \
    X(BUILD_LIST,                     103, 0) \
    X(BUILD_SET,                      104, 0) \
    X(BUILD_MAP,                      105, 0) \
    X(LOAD_ATTR,                      106, 4) \
    X(COMPARE_OP,                     107, 2) \
    X(IMPORT_NAME,                    108, 0) \
    X(IMPORT_FROM,                    109, 0) \
    X(JUMP_FORWARD,                   110, 0) \
    X(JUMP_IF_FALSE_OR_POP,           111, 0) \
    X(JUMP_IF_TRUE_OR_POP,            112, 0) \
    X(POP_JUMP_FORWARD_IF_FALSE,      114, 0) \
    X(POP_JUMP_FORWARD_IF_TRUE,       115, 0) \
    X(LOAD_GLOBAL,                    116, 5) \
    X(IS_OP,                          117, 0) \
    X(CONTAINS_OP,                    118, 0) \
    X(RERAISE,                        119, 0) \
    X(COPY,                           120, 0) \
    X(BINARY_OP,                      122, 1) \
    X(SEND,                           123, 0) \
    X(LOAD_FAST,                      124, 0) \
    X(STORE_FAST,                     125, 0) \
    X(DELETE_FAST,                    126, 0) \
    X(POP_JUMP_FORWARD_IF_NOT_NONE,   128, 0) \
    X(POP_JUMP_FORWARD_IF_NONE,       129, 0) \
    X(RAISE_VARARGS,                  130, 0) \
    X(GET_AWAITABLE,                  131, 0) \
    X(MAKE_FUNCTION,                  132, 0) \
    X(BUILD_SLICE,                    133, 0) \
    X(JUMP_BACKWARD_NO_INTERRUPT,     134, 0) \
    X(MAKE_CELL,                      135, 0) \
    X(LOAD_CLOSURE,                   136, 0) \
    X(LOAD_DEREF,                     137, 0) \
    X(STORE_DEREF,                    138, 0) \
    X(DELETE_DEREF,                   139, 0) \
    X(JUMP_BACKWARD,                  140, 0) \
    X(CALL_FUNCTION_EX,               142, 0) \
    X(EXTENDED_ARG,                   144, 0) \
    X(LIST_APPEND,                    145, 0) \
    X(SET_ADD,                        146, 0) \
    X(MAP_ADD,                        147, 0) \
    X(LOAD_CLASSDEREF,                148, 0) \
    X(COPY_FREE_VARS,                 149, 0) \
    X(RESUME,                         151, 0) \
    X(MATCH_CLASS,                    152, 0) \
    X(FORMAT_VALUE,                   155, 0) \
    X(BUILD_CONST_KEY_MAP,            156, 0) \
    X(BUILD_STRING,                   157, 0) \
    X(LOAD_METHOD,                    160, 10) \
    X(LIST_EXTEND,                    162, 0) \
    X(SET_UPDATE,                     163, 0) \
    X(DICT_MERGE,                     164, 0) \
    X(DICT_UPDATE,                    165, 0) \
    X(PRECALL,                        166, 1) \
    X(CALL,                           171, 4) \
    X(KW_NAMES,                       172, 0) \
    X(POP_JUMP_BACKWARD_IF_NOT_NONE,  173, 0) \
    X(POP_JUMP_BACKWARD_IF_NONE,      174, 0) \
    X(POP_JUMP_BACKWARD_IF_FALSE,     175, 0) \
    X(POP_JUMP_BACKWARD_IF_TRUE,      176, 0)

/* CPython 3.12.1: X(NAME, number, cache units). */
#define CDYN_NATIVE_OPS_312(X) \
    X(CACHE,                            0, 0) \
    X(POP_TOP,                          1, 0) \
    X(PUSH_NULL,                        2, 0) \
    X(END_FOR,                          4, 0) \
    X(END_SEND,                         5, 0) \
    X(NOP,                              9, 0) \
    X(UNARY_NEGATIVE,                  11, 0) \
    X(UNARY_NOT,                       12, 0) \
    X(UNARY_INVERT,                    15, 0) \
    X(BINARY_SUBSCR,                   25, 1) \
    X(BINARY_SLICE,                    26, 0) \
    X(STORE_SLICE,                     27, 0) \
    X(GET_LEN,                         30, 0) \
    X(MATCH_MAPPING,                   31, 0) \
    X(MATCH_SEQUENCE,                  32, 0) \
    X(MATCH_KEYS,                      33, 0) \
    X(PUSH_EXC_INFO,                   35, 0) \
    X(CHECK_EXC_MATCH,                 36, 0) \
    X(CHECK_EG_MATCH,                  37, 0) \
    X(WITH_EXCEPT_START,               49, 0) \
    X(GET_AITER,                       50, 0) \
    X(GET_ANEXT,                       51, 0) \
    X(BEFORE_ASYNC_WITH,               52, 0) \
    X(BEFORE_WITH,                     53, 0) \
    X(END_ASYNC_FOR,                   54, 0) \
    X(CLEANUP_THROW,                   55, 0) \
    X(STORE_SUBSCR,                    60, 1) \
    X(DELETE_SUBSCR,                   61, 0) \
    X(GET_ITER,                        68, 0) \
    X(GET_YIELD_FROM_ITER,             69, 0) \
    X(LOAD_BUILD_CLASS,                71, 0) \
    X(LOAD_ASSERTION_ERROR,            74, 0) \
    X(RETURN_GENERATOR,                75, 0) \
    X(RETURN_VALUE,                    83, 0) \
    X(SETUP_ANNOTATIONS,               85, 0) \
    X(LOAD_LOCALS,                     87, 0) \
    X(POP_EXCEPT,                      89, 0) \
    X(STORE_NAME,                      90, 0) \
    X(DELETE_NAME,                     91, 0) \
    X(UNPACK_SEQUENCE,                 92, 1) \
    X(FOR_ITER,                        93, 1) \
    X(UNPACK_EX,                       94, 0) \
    X(STORE_ATTR,                      95, 4) \
    X(DELETE_ATTR,                     96, 0) \
    X(STORE_GLOBAL,                    97, 0) \
    X(DELETE_GLOBAL,                   98, 0) \
    X(SWAP,                            99, 0) \
    X(LOAD_CONST,                     100, 0) \
    X(LOAD_NAME,                      101, 0) \
    X(BUILD_TUPLE,                    102, 0) \
    X(BUILD_LIST,                     103, 0) \
    X(BUILD_SET,                      104, 0) \
    X(BUILD_MAP,                      105, 0) \
    X(LOAD_ATTR,                      106, 9) \
    X(COMPARE_OP,                     107, 1) \
    X(IMPORT_NAME,                    108, 0) \
    X(IMPORT_FROM,                    109, 0) \
    X(JUMP_FORWARD,                   110, 0) \
    X(POP_JUMP_IF_FALSE,              114, 0) \
    X(POP_JUMP_IF_TRUE,               115, 0) \
    X(LOAD_GLOBAL,                    116, 4) \
    X(IS_OP,                          117, 0) \
    X(CONTAINS_OP,                    118, 0) \
    X(RERAISE,                        119, 0) \
    X(COPY,                           120, 0) \
    X(RETURN_CONST,                   121, 0) \
    X(BINARY_OP,                      122, 1) \
    X(SEND,                           123, 1) \
    X(LOAD_FAST,                      124, 0) \
    X(STORE_FAST,                     125, 0) \
    X(DELETE_FAST,                    126, 0) \
    X(LOAD_FAST_CHECK,                127, 0) \
    X(POP_JUMP_IF_NOT_NONE,           128, 0) \
    X(POP_JUMP_IF_NONE,               129, 0) \
    X(RAISE_VARARGS,                  130, 0) \
    X(GET_AWAITABLE,                  131, 0) \
    X(MAKE_FUNCTION,                  132, 0) \
    X(BUILD_SLICE,                    133, 0) \
    X(JUMP_BACKWARD_NO_INTERRUPT,     134, 0) \
    X(MAKE_CELL,                      135, 0) \
    X(LOAD_CLOSURE,                   136, 0) \
    X(LOAD_DEREF,                     137, 0) \
    X(STORE_DEREF,                    138, 0) \
    X(DELETE_DEREF,                   139, 0) \
    X(JUMP_BACKWARD,                  140, 0) \
    X(LOAD_SUPER_ATTR,                141, 1) \
    X(CALL_FUNCTION_EX,               142, 0) \
    X(LOAD_FAST_AND_CLEAR,            143, 0) \
    X(EXTENDED_ARG,                   144, 0) \
    X(LIST_APPEND,                    145, 0) \
    X(SET_ADD,                        146, 0) \
    X(MAP_ADD,                        147, 0) \
    X(COPY_FREE_VARS,                 149, 0) \
    X(YIELD_VALUE,                    150, 0) \
    X(RESUME,                         151, 0) \
    X(MATCH_CLASS,                    152, 0) \
    X(FORMAT_VALUE,                   155, 0) \
    X(BUILD_CONST_KEY_MAP,            156, 0) \
    X(BUILD_STRING,                   157, 0) \
    X(LIST_EXTEND,                    162, 0) \
    X(SET_UPDATE,                     163, 0) \
    X(DICT_MERGE,                     164, 0) \
    X(DICT_UPDATE,                    165, 0) \
    X(CALL,                           171, 3) \
    X(KW_NAMES,                       172, 0) \
    X(CALL_INTRINSIC_1,               173, 0) \
    X(CALL_INTRINSIC_2,               174, 0) \
    X(LOAD_FROM_DICT_OR_GLOBALS,      175, 0) \
    X(LOAD_FROM_DICT_OR_DEREF,        176, 0)

/* CPython 3.13.0: X(NAME, number, cache units). */
#define CDYN_NATIVE_OPS_313(X) \
    X(CACHE,                            0, 0) \
    X(BEFORE_ASYNC_WITH,                1, 0) \
    X(BEFORE_WITH,                      2, 0) \
    X(BINARY_SLICE,                     4, 0) \
    X(BINARY_SUBSCR,                    5, 1) \
    X(CHECK_EG_MATCH,                   6, 0) \
    X(CHECK_EXC_MATCH,                  7, 0) \
    X(CLEANUP_THROW,                    8, 0) \
    X(DELETE_SUBSCR,                    9, 0) \
    X(END_ASYNC_FOR,                   10, 0) \
    X(END_FOR,                         11, 0) \
    X(END_SEND,                        12, 0) \
    X(EXIT_INIT_CHECK,                 13, 0) \
    X(FORMAT_SIMPLE,                   14, 0) \
    X(FORMAT_WITH_SPEC,                15, 0) \
    X(GET_AITER,                       16, 0) \
    X(GET_ANEXT,                       18, 0) \
    X(GET_ITER,                        19, 0) \
    X(GET_LEN,                         20, 0) \
    X(GET_YIELD_FROM_ITER,             21, 0) \
    X(LOAD_ASSERTION_ERROR,            23, 0) \
    X(LOAD_BUILD_CLASS,                24, 0) \
    X(LOAD_LOCALS,                     25, 0) \
    X(MAKE_FUNCTION,                   26, 0) \
    X(MATCH_KEYS,                      27, 0) \
    X(MATCH_MAPPING,                   28, 0) \
    X(MATCH_SEQUENCE,                  29, 0) \
    X(NOP,                             30, 0) \
    X(POP_EXCEPT,                      31, 0) \
    X(POP_TOP,                         32, 0) \
    X(PUSH_EXC_INFO,                   33, 0) \
    X(PUSH_NULL,                       34, 0) \
    X(RETURN_GENERATOR,                35, 0) \
    X(RETURN_VALUE,                    36, 0) \
    X(SETUP_ANNOTATIONS,               37, 0) \
    X(STORE_SLICE,                     38, 0) \
    X(STORE_SUBSCR,                    39, 1) \
    X(TO_BOOL,                         40, 3) \
    X(UNARY_INVERT,                    41, 0) \
    X(UNARY_NEGATIVE,                  42, 0) \
    X(UNARY_NOT,                       43, 0) \
    X(WITH_EXCEPT_START,               44, 0) \
    X(BINARY_OP,                       45, 1) \
    X(BUILD_CONST_KEY_MAP,             46, 0) \
    X(BUILD_LIST,                      47, 0) \
    X(BUILD_MAP,                       48, 0) \
    X(BUILD_SET,                       49, 0) \
    X(BUILD_SLICE,                     50, 0) \
    X(BUILD_STRING,                    51, 0) \
    X(BUILD_TUPLE,                     52, 0) \
    X(CALL,                            53, 3) \
    X(CALL_FUNCTION_EX,                54, 0) \
    X(CALL_INTRINSIC_1,                55, 0) \
    X(CALL_INTRINSIC_2,                56, 0) \
    X(CALL_KW,                         57, 0) \
    X(COMPARE_OP,                      58, 1) \
    X(CONTAINS_OP,                     59, 1) \
    X(CONVERT_VALUE,                   60, 0) \
    X(COPY,                            61, 0) \
    X(COPY_FREE_VARS,                  62, 0) \
    X(DELETE_ATTR,                     63, 0) \
    X(DELETE_DEREF,                    64, 0) \
    X(DELETE_FAST,                     65, 0) \
    X(DELETE_GLOBAL,                   66, 0) \
    X(DELETE_NAME,                     67, 0) \
    X(DICT_MERGE,                      68, 0) \
    X(DICT_UPDATE,                     69, 0) \
    X(EXTENDED_ARG,                    71, 0) \
    X(FOR_ITER,                        72, 1) \
    X(GET_AWAITABLE,                   73, 0) \
    X(IMPORT_FROM,                     74, 0) \
    X(IMPORT_NAME,                     75, 0) \
    X(IS_OP,                           76, 0) \
    X(JUMP_BACKWARD,                   77, 1) \
    X(JUMP_BACKWARD_NO_INTERRUPT,      78, 0) \
    X(JUMP_FORWARD,                    79, 0) \
    X(LIST_APPEND,                     80, 0) \
    X(LIST_EXTEND,                     81, 0) \
    X(LOAD_ATTR,                       82, 9) \
    X(LOAD_CONST,                      83, 0) \
    X(LOAD_DEREF,                      84, 0) \
    X(LOAD_FAST,                       85, 0) \
    X(LOAD_FAST_AND_CLEAR,             86, 0) \
    X(LOAD_FAST_CHECK,                 87, 0) \
    X(LOAD_FAST_LOAD_FAST,             88, 0) \
    X(LOAD_FROM_DICT_OR_DEREF,         89, 0) \
    X(LOAD_FROM_DICT_OR_GLOBALS,       90, 0) \
    X(LOAD_GLOBAL,                     91, 4) \
    X(LOAD_NAME,                       92, 0) \
    X(LOAD_SUPER_ATTR,                 93, 1) \
    X(MAKE_CELL,                       94, 0) \
    X(MAP_ADD,                         95, 0) \
    X(MATCH_CLASS,                     96, 0) \
    X(POP_JUMP_IF_FALSE,               97, 1) \
    X(POP_JUMP_IF_NONE,                98, 1) \
    X(POP_JUMP_IF_NOT_NONE,            99, 1) \
    X(POP_JUMP_IF_TRUE,               100, 1) \
    X(RAISE_VARARGS,                  101, 0) \
    X(RERAISE,                        102, 0) \
    X(RETURN_CONST,                   103, 0) \
    X(SEND,                           104, 1) \
    X(SET_ADD,                        105, 0) \
    X(SET_FUNCTION_ATTRIBUTE,         106, 0) \
    X(SET_UPDATE,                     107, 0) \
    X(STORE_ATTR,                     108, 4) \
    X(STORE_DEREF,                    109, 0) \
    X(STORE_FAST,                     110, 0) \
    X(STORE_FAST_LOAD_FAST,           111, 0) \
    X(STORE_FAST_STORE_FAST,          112, 0) \
    X(STORE_GLOBAL,                   113, 0) \
    X(STORE_NAME,                     114, 0) \
    X(SWAP,                           115, 0) \
    X(UNPACK_EX,                      116, 0) \
    X(UNPACK_SEQUENCE,                117, 1) \
    X(YIELD_VALUE,                    118, 0) \
    X(RESUME,                         149, 0)

#if PY_VERSION_HEX >= 0x030E0000
#error "cdynamo's bytecode layer knows CPython 3.11 to 3.13"
#elif PY_VERSION_HEX >= 0x030D0000
#define CDYN_NATIVE_OPS CDYN_NATIVE_OPS_313
#elif PY_VERSION_HEX >= 0x030C0000
#define CDYN_NATIVE_OPS CDYN_NATIVE_OPS_312
#else
#define CDYN_NATIVE_OPS CDYN_NATIVE_OPS_311
#endif

/* BINARY_OP's arguments (the same on 3.11 to 3.13; checked in opcodes_check.c). */
#define CDYN_BINARY_OPS(X) \
    X(NB_ADD, 0) \
    X(NB_AND, 1) \
    X(NB_FLOOR_DIVIDE, 2) \
    X(NB_LSHIFT, 3) \
    X(NB_MATRIX_MULTIPLY, 4) \
    X(NB_MULTIPLY, 5) \
    X(NB_REMAINDER, 6) \
    X(NB_OR, 7) \
    X(NB_POWER, 8) \
    X(NB_RSHIFT, 9) \
    X(NB_SUBTRACT, 10) \
    X(NB_TRUE_DIVIDE, 11) \
    X(NB_XOR, 12) \
    X(NB_INPLACE_ADD, 13) \
    X(NB_INPLACE_AND, 14) \
    X(NB_INPLACE_FLOOR_DIVIDE, 15) \
    X(NB_INPLACE_LSHIFT, 16) \
    X(NB_INPLACE_MATRIX_MULTIPLY, 17) \
    X(NB_INPLACE_MULTIPLY, 18) \
    X(NB_INPLACE_REMAINDER, 19) \
    X(NB_INPLACE_OR, 20) \
    X(NB_INPLACE_POWER, 21) \
    X(NB_INPLACE_RSHIFT, 22) \
    X(NB_INPLACE_SUBTRACT, 23) \
    X(NB_INPLACE_TRUE_DIVIDE, 24) \
    X(NB_INPLACE_XOR, 25)

#ifndef CDYN_OPCODES_TABLES_ONLY
enum {
#define CDYN_NB_ENUM(name, num) name = num,
    CDYN_BINARY_OPS(CDYN_NB_ENUM)
#undef CDYN_NB_ENUM
};

typedef enum {
#define CDYN_OP_ENUM(name) name,
    CDYN_OPS(CDYN_OP_ENUM)
#undef CDYN_OP_ENUM
    CDYN_NOPS            /* number of cdyn_op values */
} cdyn_op;

/* Name of op: a static string, or NULL when op is no cdyn_op. */
const char *cdyn_opname(int op);

/* The op named `name` (a C string), or -1. */
int cdyn_op_by_name(const char *name);

/* The running CPython's number for op, or -1 when this version has no such real opcode. */
int cdyn_op_native(int op);

/* The cdyn_op of the running CPython's opcode number `num`, or -1 when it is no real opcode
 * of this version (specialised and instrumented forms included: co_code never has them). */
int cdyn_op_from_native(int num);

/* 1 when op is a real opcode of the running version (one that may appear in co_code). */
int cdyn_opcode_known(int op);

#endif /* CDYN_OPCODES_TABLES_ONLY */
#endif
