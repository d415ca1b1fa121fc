/* bytecode.c: CPython 3.11 bytecode decode and assembly (see bytecode.h).
 *
 * Passes, in order:
 *   decode:   code units -> instructions (EXTENDED_ARG folded, CACHE dropped)
 *             -> jump targets as instruction indices -> positions (co_linetable)
 *             -> exception-table entry per instruction (co_exceptiontable)
 *   assemble: jump directions fixed from target order -> instruction sizes grown to a
 *             fixed point (EXTENDED_ARG prefixes) -> co_code -> line table
 *             -> exception table -> co_stacksize -> PyCode_NewWithPosOnlyArgs
 *
 * Formats: CPython 3.11 Objects/locations.md (line table) and
 * Objects/exception_handling_notes.txt (exception table); summarised in
 * shared/notes/cpython-3.11-engine-facts.md section 4.
 */
#include "bytecode.h"

/* Largest oparg: four bytes (three EXTENDED_ARG prefixes), kept within int. */
#define CDYN_MAX_OPARG 0x7FFFFFFF

/* ---------------------------------------------------------------- opcode tables */

static const char *const op_names[CDYN_NOPS] = {
#define CDYN_NAME_ENTRY(name) [name] = #name,
    CDYN_OPS(CDYN_NAME_ENTRY)
#undef CDYN_NAME_ENTRY
};

/* Name of op, or NULL when op is no cdyn_op. */
const char *cdyn_opname(int op)
{
    return op >= 0 && op < CDYN_NOPS ? op_names[op] : NULL;
}

int cdyn_op_by_name(const char *name)
{
    for (int op = 0; op < CDYN_NOPS; op++) {
        if (strcmp(op_names[op], name) == 0) {
            return op;
        }
    }
    return -1;
}

/* The running version's number of op, or -1. */
int cdyn_op_native(int op)
{
    switch (op) {
#define CDYN_NATIVE_CASE(name, num, cache) case name: return num;
    CDYN_NATIVE_OPS(CDYN_NATIVE_CASE)
#undef CDYN_NATIVE_CASE
    default:
        return -1;
    }
}

int cdyn_op_from_native(int num)
{
    switch (num) {
#define CDYN_FROM_CASE(name, num, cache) case num: return name;
    CDYN_NATIVE_OPS(CDYN_FROM_CASE)
#undef CDYN_FROM_CASE
    default:
        return -1;
    }
}

/* CACHE units after op in the running version (0 for ops it lacks). */
int cdyn_cache_size(int opcode)
{
    switch (opcode) {
#define CDYN_CACHE_CASE(name, num, cache) case name: return cache;
    CDYN_NATIVE_OPS(CDYN_CACHE_CASE)
#undef CDYN_CACHE_CASE
    default:
        return 0;
    }
}

/* 1 when op may stand in an instruction list of the running version: a real opcode of it,
 * or an operation of the normal form that assembly turns into real ones (below). */
int cdyn_opcode_known(int op)
{
    if (op == CACHE || op == EXTENDED_ARG) {
        return 0;
    }
    if (cdyn_op_native(op) >= 0) {
        return 1;
    }
    switch (op) {
    case POP_JUMP_IF_FALSE: case POP_JUMP_IF_TRUE: case POP_JUMP_IF_NONE:
    case POP_JUMP_IF_NOT_NONE: case LOAD_METHOD: case KW_NAMES: case PRECALL:
    case LOAD_CLOSURE:
        return 1;
    default:
        return 0;
    }
}

/* Stack effect of an instruction of the real (assembled) form as CPython's own compiler
 * counts it (the co_stacksize it wrote is what a round trip must reproduce), through the
 * exported PyCompile_OpcodeStackEffectWithJump. One exception: RETURN_GENERATOR counts +1,
 * the value the first send() pushes when the generator resumes (the compiler says 0
 * because it adds the generator prefix after its own depth pass; the POP_TOP that follows
 * pops that value). Returns PY_INVALID_STACK_EFFECT for ops this version lacks. */
static int jump_in_direction(int op, int backward);

int cdyn_stack_effect(int opcode, int oparg, int jump)
{
    /* a conditional jump of the normal form counts as its forward real form */
    int num = cdyn_op_native(cdyn_is_jump(opcode) ? jump_in_direction(opcode, 0) : opcode);
    if (opcode == RETURN_GENERATOR) {
        return 1;
    }
    return num < 0 ? PY_INVALID_STACK_EFFECT
                   : PyCompile_OpcodeStackEffectWithJump(num, oparg, jump);
}

/* 1 when opcode's relative argument points backwards. */
static int is_backward_jump(int opcode)
{
    switch (opcode) {
    case JUMP_BACKWARD:
    case JUMP_BACKWARD_NO_INTERRUPT:
    case POP_JUMP_BACKWARD_IF_FALSE:
    case POP_JUMP_BACKWARD_IF_TRUE:
    case POP_JUMP_BACKWARD_IF_NONE:
    case POP_JUMP_BACKWARD_IF_NOT_NONE:
        return 1;
    default:
        return 0;
    }
}

/* 1 for relative jumps (no version since 3.11 has absolute ones). */
int cdyn_is_jump(int opcode)
{
    switch (opcode) {
    case FOR_ITER:
    case SEND:
    case JUMP_FORWARD:
    case JUMP_IF_FALSE_OR_POP:
    case JUMP_IF_TRUE_OR_POP:
    case POP_JUMP_IF_FALSE:
    case POP_JUMP_IF_TRUE:
    case POP_JUMP_IF_NONE:
    case POP_JUMP_IF_NOT_NONE:
    case POP_JUMP_FORWARD_IF_FALSE:
    case POP_JUMP_FORWARD_IF_TRUE:
    case POP_JUMP_FORWARD_IF_NONE:
    case POP_JUMP_FORWARD_IF_NOT_NONE:
        return 1;
    default:
        return is_backward_jump(opcode);
    }
}

/* 1 for jumps that never fall through. */
int cdyn_is_unconditional_jump(int opcode)
{
    return opcode == JUMP_FORWARD || opcode == JUMP_BACKWARD ||
           opcode == JUMP_BACKWARD_NO_INTERRUPT;
}

/* 1 when control never reaches the next instruction. */
int cdyn_is_terminator(int opcode)
{
    return cdyn_is_unconditional_jump(opcode) || opcode == RETURN_VALUE ||
           opcode == RETURN_CONST || opcode == RAISE_VARARGS || opcode == RERAISE;
}

/* The real opcode for jump op of the normal form pointing in direction `backward`, or -1
 * when the running version has none (FOR_ITER, SEND and JUMP_IF_*_OR_POP only jump forward;
 * since 3.12 so do the conditional jumps). */
static int jump_in_direction(int op, int backward)
{
    static const struct { int norm, fwd, back; } jumps[] = {
        {JUMP_FORWARD, JUMP_FORWARD, JUMP_BACKWARD},
        {JUMP_BACKWARD, JUMP_FORWARD, JUMP_BACKWARD},
        {JUMP_BACKWARD_NO_INTERRUPT, JUMP_FORWARD, JUMP_BACKWARD_NO_INTERRUPT},
#if PY_VERSION_HEX < 0x030C0000
        {POP_JUMP_IF_FALSE, POP_JUMP_FORWARD_IF_FALSE, POP_JUMP_BACKWARD_IF_FALSE},
        {POP_JUMP_IF_TRUE, POP_JUMP_FORWARD_IF_TRUE, POP_JUMP_BACKWARD_IF_TRUE},
        {POP_JUMP_IF_NONE, POP_JUMP_FORWARD_IF_NONE, POP_JUMP_BACKWARD_IF_NONE},
        {POP_JUMP_IF_NOT_NONE, POP_JUMP_FORWARD_IF_NOT_NONE, POP_JUMP_BACKWARD_IF_NOT_NONE},
#endif
    };
    for (size_t k = 0; k < sizeof jumps / sizeof *jumps; k++) {
        if (jumps[k].norm == op) {
            return backward ? jumps[k].back : jumps[k].fwd;
        }
    }
    return backward ? -1 : op;
}

/* ---------------------------------------------------------------- instruction facts */

int cdyn_compare_kind(int oparg)
{
    return oparg >> CDYN_COMPARE_SHIFT;
}

int cdyn_compare_oparg(int cmp)
{
#if CDYN_COMPARE_SHIFT == 0
    return cmp;
#else
    /* the low bits: CPython's comparison masks (less 2, greater 4, equal 8, unordered 1) */
    static const int masks[6] = {2, 2 | 8, 8, 1 | 2 | 4, 4, 4 | 8};
    return (cmp << CDYN_COMPARE_SHIFT) | (cmp >= 0 && cmp < 6 ? masks[cmp] : 0);
#endif
}

int cdyn_op_local_slot(int opcode)
{
    switch (opcode) {
    case LOAD_FAST: case LOAD_FAST_CHECK: case LOAD_FAST_AND_CLEAR: case STORE_FAST:
    case DELETE_FAST: case LOAD_CLOSURE: case LOAD_DEREF: case STORE_DEREF: case DELETE_DEREF:
    case MAKE_CELL: case LOAD_CLASSDEREF: case LOAD_FROM_DICT_OR_DEREF:
        return 1;
    default:
        return 0;
    }
}

Py_ssize_t cdyn_follow_jumps(const cdyn_instr_list *l, Py_ssize_t i)
{
    for (int hops = 0; hops < 8 && i >= 0 && i < l->len; hops++) {
        const cdyn_instr *ins = &l->items[i];
        if (!cdyn_is_unconditional_jump(ins->opcode) || ins->target < 0 || ins->target == i) {
            break;
        }
        i = ins->target;
    }
    return i;
}

int cdyn_in_user_try(const cdyn_instr_list *l, Py_ssize_t i)
{
    int h = l->items[i].exc_handler;
    return h >= 0 && !(l->items[h].opcode == CALL_INTRINSIC_1 &&
                       l->items[h].oparg == CDYN_INTRINSIC_STOPITERATION_ERROR);
}

Py_ssize_t cdyn_for_iter_exit(const cdyn_instr_list *l, Py_ssize_t target)
{
    Py_ssize_t i = target;
    for (int k = 0; k < CDYN_FOR_ITER_SKIPS && i < l->len; k++) {
        int op = l->items[i].opcode;
        if (op != END_FOR && !(k > 0 && op == POP_TOP)) {
            break;
        }
        i++;
    }
    return i;
}

/* ---------------------------------------------------------------- instruction list */

/* Empty list, no storage. */
void cdyn_instrs_init(cdyn_instr_list *l)
{
    l->items = NULL;
    l->len = 0;
    l->cap = 0;
}

/* Free the storage; the list is empty and reusable afterwards. */
void cdyn_instrs_clear(cdyn_instr_list *l)
{
    PyMem_Free(l->items);
    cdyn_instrs_init(l);
}

/* Append a copy of *ins; its index, or -1 with MemoryError. */
Py_ssize_t cdyn_instrs_append(cdyn_instr_list *l, const cdyn_instr *ins)
{
    if (l->len == l->cap) {
        Py_ssize_t ncap = l->cap ? l->cap * 2 : 16;
        cdyn_instr *items = NULL;
        if ((size_t)ncap > PY_SSIZE_T_MAX / sizeof(cdyn_instr)) {
            PyErr_NoMemory();
            return -1;
        }
        items = PyMem_Realloc(l->items, (size_t)ncap * sizeof(cdyn_instr));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        l->items = items;
        l->cap = ncap;
    }
    l->items[l->len] = *ins;
    return l->len++;
}

/* A fresh instruction: no target, no position, no handler, not from decoded code. */
cdyn_instr cdyn_instr_make(int opcode, int oparg)
{
    cdyn_instr ins;
    ins.opcode = opcode;
    ins.oparg = oparg;
    ins.target = -1;
    ins.offset = -1;
    ins.lineno = -1;
    ins.end_lineno = -1;
    ins.col = -1;
    ins.end_col = -1;
    ins.exc_handler = -1;
    ins.exc_depth = 0;
    ins.exc_lasti = 0;
    ins.ext = 0;
    ins.fused = 0;
    return ins;
}

/* ---------------------------------------------------------------- byte buffer */

typedef struct {
    unsigned char *data;   /* owned, PyMem_Malloc'd */
    Py_ssize_t len, cap;
} bytebuf;

/* Append one byte; 0, or -1 with MemoryError. */
static int buf_put(bytebuf *b, unsigned int byte)
{
    if (b->len == b->cap) {
        Py_ssize_t ncap = b->cap ? b->cap * 2 : 64;
        unsigned char *data = PyMem_Realloc(b->data, (size_t)ncap);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = data;
        b->cap = ncap;
    }
    b->data[b->len++] = (unsigned char)(byte & 0xFF);
    return 0;
}

/* New bytes object with the contents (new reference), or NULL. Frees the buffer. */
static PyObject *buf_finish(bytebuf *b)
{
    PyObject *res = PyBytes_FromStringAndSize((const char *)b->data, b->len);
    PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    return res;
}

/* ---------------------------------------------------------------- decode */

/* Reader over a bytes table; `bad` is set when a read runs past the end. */
typedef struct {
    const unsigned char *p, *end;
    int bad;
} reader;

/* Next byte, or 0 with r->bad set at the end of the table. */
static unsigned int rd_byte(reader *r)
{
    if (r->p >= r->end) {
        r->bad = 1;
        return 0;
    }
    return *r->p++;
}

/* Line-table varint: 6-bit chunks, least significant first, 0x40 = more follows. */
static unsigned int rd_varint_lsb(reader *r)
{
    unsigned int val = 0, shift = 0, b;
    do {
        b = rd_byte(r);
        if (shift < 32) {
            val |= (b & 63u) << shift;
        }
        shift += 6;
    } while ((b & 64u) && !r->bad);
    return val;
}

/* Line-table signed varint: low bit is the sign. */
static int rd_svarint_lsb(reader *r)
{
    unsigned int u = rd_varint_lsb(r);
    return (u & 1u) ? -(int)(u >> 1) : (int)(u >> 1);
}

/* Exception-table varint: 6-bit chunks, most significant first, 0x40 = more follows. */
static unsigned int rd_varint_msb(reader *r)
{
    unsigned int b = rd_byte(r);
    unsigned int val = b & 63u;
    while ((b & 64u) && !r->bad) {
        b = rd_byte(r);
        val = (val << 6) | (b & 63u);
    }
    return val;
}

/* Attach positions from co_linetable to the instructions of out. unit_instr maps each
 * code unit to its instruction index. 0, or -1 with ValueError on a malformed table. */
static int decode_positions(PyCodeObject *co, cdyn_instr_list *out, const int *unit_instr,
                            Py_ssize_t nunits)
{
    reader r;
    Py_ssize_t unit = 0;
    int line = co->co_firstlineno;
    assert(PyBytes_Check(co->co_linetable));
    r.p = (const unsigned char *)PyBytes_AS_STRING(co->co_linetable);
    r.end = r.p + PyBytes_GET_SIZE(co->co_linetable);
    r.bad = 0;
    while (r.p < r.end && unit < nunits) {
        unsigned int first = rd_byte(&r);
        int code = (int)((first >> 3) & 15u);
        int length = (int)(first & 7u) + 1;
        int lineno = -1, end_lineno = -1, col = -1, end_col = -1;
        if (!(first & 0x80u)) {
            PyErr_SetString(PyExc_ValueError, "co_linetable: entry without its start bit");
            return -1;
        }
        if (code == 15) {                    /* no location */
        }
        else if (code == 14) {               /* long form */
            line += rd_svarint_lsb(&r);
            lineno = line;
            end_lineno = line + (int)rd_varint_lsb(&r);
            col = (int)rd_varint_lsb(&r) - 1;
            end_col = (int)rd_varint_lsb(&r) - 1;
        }
        else if (code == 13) {               /* line only */
            line += rd_svarint_lsb(&r);
            lineno = end_lineno = line;
        }
        else if (code >= 10) {               /* one line, line delta code - 10 */
            line += code - 10;
            lineno = end_lineno = line;
            col = (int)rd_byte(&r);
            end_col = (int)rd_byte(&r);
        }
        else {                               /* short form, same line */
            unsigned int second = rd_byte(&r);
            lineno = end_lineno = line;
            col = code * 8 + (int)((second >> 4) & 7u);
            end_col = col + (int)(second & 15u);
        }
        if (r.bad) {
            PyErr_SetString(PyExc_ValueError, "co_linetable: truncated entry");
            return -1;
        }
        for (int k = 0; k < length && unit < nunits; k++, unit++) {
            cdyn_instr *ins = &out->items[unit_instr[unit]];
            if (ins->offset == unit) {
                ins->lineno = lineno;
                ins->end_lineno = end_lineno;
                ins->col = col;
                ins->end_col = end_col;
            }
        }
    }
    return 0;
}

/* Attach co_exceptiontable entries to the instructions of out. inst_start[i] is the first
 * code unit (EXTENDED_ARG included) of instruction i. 0, or -1 with ValueError. */
static int decode_exceptions(PyCodeObject *co, cdyn_instr_list *out, const int *unit_instr,
                             const int *inst_start, Py_ssize_t nunits)
{
    reader r;
    assert(PyBytes_Check(co->co_exceptiontable));
    r.p = (const unsigned char *)PyBytes_AS_STRING(co->co_exceptiontable);
    r.end = r.p + PyBytes_GET_SIZE(co->co_exceptiontable);
    r.bad = 0;
    while (r.p < r.end) {
        unsigned int start, length, target, dl;
        int handler;
        if (!(*r.p & 0x80u)) {
            PyErr_SetString(PyExc_ValueError, "co_exceptiontable: entry without its start bit");
            return -1;
        }
        start = rd_varint_msb(&r);
        length = rd_varint_msb(&r);
        target = rd_varint_msb(&r);
        dl = rd_varint_msb(&r);
        if (r.bad || (Py_ssize_t)start + (Py_ssize_t)length > nunits ||
            (Py_ssize_t)target >= nunits) {
            PyErr_SetString(PyExc_ValueError, "co_exceptiontable: entry out of range");
            return -1;
        }
        handler = unit_instr[target];
        if (inst_start[handler] != (int)target) {
            PyErr_Format(PyExc_ValueError,
                         "co_exceptiontable: handler unit %u is inside an instruction", target);
            return -1;
        }
        for (unsigned int u = start; u < start + length; u++) {
            cdyn_instr *ins = &out->items[unit_instr[u]];
            if (ins->offset == (int)u) {
                ins->exc_handler = handler;
                ins->exc_depth = (int)(dl >> 1);
                ins->exc_lasti = (int)(dl & 1u);
            }
        }
    }
    return 0;
}

static int normalize(const cdyn_instr_list *in, cdyn_instr_list *out);

/* Decode co (borrowed) into out; 0, or -1 with an exception (out is then empty). */
int cdyn_decode(PyCodeObject *co, cdyn_instr_list *out)
{
    PyObject *code = NULL;
    int *unit_instr = NULL;     /* code unit -> instruction index */
    int *inst_start = NULL;     /* instruction index -> first unit, EXTENDED_ARG included */
    int rc = -1;
    const unsigned char *bytes;
    Py_ssize_t nunits, u;
    unsigned int ext = 0;
    int nprefix = 0, prefix_start = -1;
    cdyn_instr_list norm;

    cdyn_instrs_init(out);
    code = PyCode_GetCode(co);
    if (code == NULL) {
        goto cleanup;
    }
    bytes = (const unsigned char *)PyBytes_AS_STRING(code);
    nunits = PyBytes_GET_SIZE(code) / 2;
    if (nunits > INT_MAX / 2) {
        PyErr_SetString(PyExc_OverflowError, "code object too large to decode");
        goto cleanup;
    }
    unit_instr = PyMem_Malloc(sizeof(int) * (size_t)(nunits + 1));
    inst_start = PyMem_Malloc(sizeof(int) * (size_t)(nunits + 1));
    if (unit_instr == NULL || inst_start == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }

    /* Instructions: fold EXTENDED_ARG, skip caches. */
    for (u = 0; u < nunits;) {
        int op = cdyn_op_from_native(bytes[2 * u]), arg = bytes[2 * u + 1], ncache;
        cdyn_instr ins;
        Py_ssize_t idx = out->len;
        unit_instr[u] = (int)idx;
        if (op == EXTENDED_ARG) {
            if (++nprefix > 3) {
                PyErr_Format(PyExc_ValueError, "more than 3 EXTENDED_ARG at unit %zd", u);
                goto cleanup;
            }
            if (prefix_start < 0) {
                prefix_start = (int)u;
            }
            ext = (ext << 8) | (unsigned int)arg;
            u++;
            continue;
        }
        if (op == CACHE || op < 0) {
            PyErr_Format(PyExc_ValueError, "unexpected opcode %d at unit %zd", bytes[2 * u], u);
            goto cleanup;
        }
        ncache = cdyn_cache_size(op);
        if (u + 1 + ncache > nunits) {
            PyErr_Format(PyExc_ValueError, "caches of %s run past the end", cdyn_opname(op));
            goto cleanup;
        }
        if (((ext << 8) | (unsigned int)arg) > CDYN_MAX_OPARG) {
            PyErr_Format(PyExc_ValueError, "oparg too large at unit %zd", u);
            goto cleanup;
        }
        ins = cdyn_instr_make(op, (int)((ext << 8) | (unsigned int)arg));
        ins.offset = (int)u;
        ins.ext = nprefix;
        inst_start[idx] = prefix_start >= 0 ? prefix_start : (int)u;
        for (int k = 1; k <= ncache; k++) {
            unit_instr[u + k] = (int)idx;
        }
        if (cdyn_instrs_append(out, &ins) < 0) {
            goto cleanup;
        }
        u += 1 + ncache;
        ext = 0;
        nprefix = 0;
        prefix_start = -1;
    }
    if (nprefix > 0) {
        PyErr_SetString(PyExc_ValueError, "code ends in EXTENDED_ARG");
        goto cleanup;
    }

    /* Jump targets as instruction indices. */
    for (Py_ssize_t i = 0; i < out->len; i++) {
        cdyn_instr *ins = &out->items[i];
        Py_ssize_t next, dest;
        if (!cdyn_is_jump(ins->opcode)) {
            continue;
        }
        next = ins->offset + 1 + cdyn_cache_size(ins->opcode);
        dest = is_backward_jump(ins->opcode) ? next - ins->oparg : next + ins->oparg;
        if (dest < 0 || dest >= nunits || inst_start[unit_instr[dest]] != dest) {
            PyErr_Format(PyExc_ValueError, "%s at unit %d jumps to unit %zd, not an instruction",
                         cdyn_opname(ins->opcode), ins->offset, dest);
            goto cleanup;
        }
        ins->target = unit_instr[dest];
    }

    if (decode_positions(co, out, unit_instr, nunits) < 0 ||
        decode_exceptions(co, out, unit_instr, inst_start, nunits) < 0 ||
        normalize(out, &norm) < 0) {
        goto cleanup;
    }
    cdyn_instrs_clear(out);
    *out = norm;
    rc = 0;

cleanup:
    if (rc < 0) {
        cdyn_instrs_clear(out);
    }
    PyMem_Free(unit_instr);
    PyMem_Free(inst_start);
    Py_XDECREF(code);
    return rc;
}

/* ---------------------------------------------------------------- normal form */

/* The engine reads every version's code in one normal form (opcodes.h): decoding rewrites
 * the real instructions into it, assembly rewrites it back. The rules, per version:
 *   3.11   POP_JUMP_{FORWARD,BACKWARD}_IF_X -> POP_JUMP_IF_X (the direction follows from
 *          the target; assembly picks the real opcode again).
 *   3.12+  LOAD_ATTR with the method bit -> LOAD_METHOD, LOAD_ATTR's argument the name's
 *          index alone (as 3.11); PRECALL (3.11's) is dropped on assembly.
 *   3.13   LOAD_CONST k; CALL_KW n -> KW_NAMES k; CALL n (the names no longer on the stack,
 *          as 3.12); MAKE_FUNCTION followed by SET_FUNCTION_ATTRIBUTEs -> one MAKE_FUNCTION
 *          of their flags (as 3.12); the fused LOAD_FAST_LOAD_FAST, STORE_FAST_LOAD_FAST and
 *          STORE_FAST_STORE_FAST -> their two halves, the second marked `fused`, joined again
 *          on assembly when both still stand together; LOAD_CLOSURE (a pseudo-op since 3.13)
 *          -> LOAD_FAST on assembly.
 * The stack at every instruction of the normal form is the real one, except between
 * KW_NAMES and its CALL on 3.13 (the names tuple is then pushed by the real code). What
 * stays different is asked from the instruction facts (bytecode.h): the NULL's place in a
 * call, COMPARE_OP's argument, where a FOR_ITER leaves its loop. */

/* Fix the targets and handlers of out after a rewrite: map[i] is the new index of old
 * instruction i (map has n + 1 entries, map[n] = out->len). */
static void remap(cdyn_instr_list *out, const Py_ssize_t *map, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < out->len; i++) {
        cdyn_instr *ins = &out->items[i];
        if (ins->target >= 0 && ins->target <= n) {
            ins->target = (int)map[ins->target];
        }
        if (ins->exc_handler >= 0 && ins->exc_handler <= n) {
            ins->exc_handler = (int)map[ins->exc_handler];
        }
    }
}

/* End a rewrite into out: on success (ok) its targets and handlers remapped (map[n] set to
 * out->len), else out emptied; map freed. 0, or -1 (the exception set by the failure). */
static int finish_rewrite(cdyn_instr_list *out, Py_ssize_t *map, Py_ssize_t n, int ok)
{
    if (ok) {
        map[n] = out->len;
        remap(out, map, n);
    }
    else {
        cdyn_instrs_clear(out);
    }
    PyMem_Free(map);
    return ok ? 0 : -1;
}

/* The fused real opcode of the pair (first, second), or -1. */
static int fused_op(int first, int second)
{
#if PY_VERSION_HEX >= 0x030D0000
    if (first == LOAD_FAST && second == LOAD_FAST) {
        return LOAD_FAST_LOAD_FAST;
    }
    if (first == STORE_FAST && second == LOAD_FAST) {
        return STORE_FAST_LOAD_FAST;
    }
    if (first == STORE_FAST && second == STORE_FAST) {
        return STORE_FAST_STORE_FAST;
    }
#else
    (void)first;
    (void)second;
#endif
    return -1;
}

/* Rewrite the decoded real list `in` into the normal form in out (initialised here). 0, or
 * -1 with an exception. */
static int normalize(const cdyn_instr_list *in, cdyn_instr_list *out)
{
    Py_ssize_t n = in->len;
    Py_ssize_t *map = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    cdyn_instrs_init(out);
    if (map == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        cdyn_instr ins = in->items[i];
        map[i] = out->len;
        switch (ins.opcode) {
        case POP_JUMP_FORWARD_IF_FALSE: case POP_JUMP_BACKWARD_IF_FALSE:
            ins.opcode = POP_JUMP_IF_FALSE;
            break;
        case POP_JUMP_FORWARD_IF_TRUE: case POP_JUMP_BACKWARD_IF_TRUE:
            ins.opcode = POP_JUMP_IF_TRUE;
            break;
        case POP_JUMP_FORWARD_IF_NONE: case POP_JUMP_BACKWARD_IF_NONE:
            ins.opcode = POP_JUMP_IF_NONE;
            break;
        case POP_JUMP_FORWARD_IF_NOT_NONE: case POP_JUMP_BACKWARD_IF_NOT_NONE:
            ins.opcode = POP_JUMP_IF_NOT_NONE;
            break;
#if PY_VERSION_HEX >= 0x030C0000
        case LOAD_ATTR:
            ins.opcode = (ins.oparg & 1) ? LOAD_METHOD : LOAD_ATTR;
            ins.oparg >>= 1;
            break;
#endif
#if PY_VERSION_HEX >= 0x030D0000
        case LOAD_CONST:
            if (i + 1 < n && in->items[i + 1].opcode == CALL_KW) {
                ins.opcode = KW_NAMES;
            }
            break;
        case CALL_KW:
            if (i > 0 && in->items[i - 1].opcode == LOAD_CONST) {
                ins.opcode = CALL;
            }
            break;
        case MAKE_FUNCTION:
            while (i + 1 < n && in->items[i + 1].opcode == SET_FUNCTION_ATTRIBUTE) {
                ins.oparg |= in->items[++i].oparg;
                map[i] = out->len;
            }
            break;
        case LOAD_FAST_LOAD_FAST: case STORE_FAST_LOAD_FAST: case STORE_FAST_STORE_FAST: {
            cdyn_instr second = ins;
            ins.opcode = ins.opcode == LOAD_FAST_LOAD_FAST ? LOAD_FAST : STORE_FAST;
            second.opcode = in->items[i].opcode == STORE_FAST_STORE_FAST ? STORE_FAST : LOAD_FAST;
            ins.oparg >>= 4;
            second.oparg &= 15;
            second.fused = 1;
            if (cdyn_instrs_append(out, &ins) < 0) {
                goto error;
            }
            ins = second;
            break;
        }
#endif
        default:
            break;
        }
        if (cdyn_instrs_append(out, &ins) < 0) {
            goto error;
        }
    }
    return finish_rewrite(out, map, n, 1);

error:
    return finish_rewrite(out, map, n, 0);
}

/* 1 when some instruction of l jumps to index i. */
static int is_jump_target(const cdyn_instr_list *l, Py_ssize_t i)
{
    for (Py_ssize_t k = 0; k < l->len; k++) {
        if (l->items[k].target == i && cdyn_is_jump(l->items[k].opcode)) {
            return 1;
        }
    }
    return 0;
}

/* Rewrite the normal-form list `in` into the running version's real instructions in out
 * (initialised here); jump directions are left to the layout. 0, or -1 with an exception. */
static int denormalize(const cdyn_instr_list *in, cdyn_instr_list *out)
{
    Py_ssize_t n = in->len;
    Py_ssize_t *map = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    cdyn_instrs_init(out);
    if (map == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        cdyn_instr ins = in->items[i];
        int fop = ins.fused && i > 0 && out->len > 0
                      ? fused_op(in->items[i - 1].opcode, ins.opcode) : -1;
        map[i] = out->len;
        ins.fused = 0;
        if (fop >= 0 && in->items[i - 1].oparg < 16 && ins.oparg < 16 &&
            !in->items[i - 1].fused && !is_jump_target(in, i) &&
            out->items[out->len - 1].opcode == in->items[i - 1].opcode) {
            cdyn_instr *first = &out->items[out->len - 1];
            first->opcode = fop;
            first->oparg = (first->oparg << 4) | ins.oparg;
            map[i] = out->len - 1;
            continue;
        }
        switch (ins.opcode) {
#if PY_VERSION_HEX >= 0x030C0000
        case PRECALL:
            continue;
        case LOAD_ATTR:
            ins.oparg <<= 1;
            break;
        case LOAD_METHOD:
            ins.opcode = LOAD_ATTR;
            ins.oparg = (ins.oparg << 1) | 1;
            break;
#endif
#if PY_VERSION_HEX >= 0x030D0000
        case LOAD_CLOSURE:
            ins.opcode = LOAD_FAST;
            break;
        case KW_NAMES:
            ins.opcode = LOAD_CONST;
            break;
        case CALL:   /* after KW_NAMES (and a PRECALL dropped between them) */
            for (Py_ssize_t k = i - 1; k >= 0 && in->items[k].opcode != CALL; k--) {
                if (in->items[k].opcode == KW_NAMES) {
                    ins.opcode = CALL_KW;
                    break;
                }
                if (in->items[k].opcode != PRECALL) {
                    break;
                }
            }
            break;
        case MAKE_FUNCTION: {
            int flags = ins.oparg;
            ins.oparg = 0;
            if (cdyn_instrs_append(out, &ins) < 0) {
                goto error;
            }
            ins.opcode = SET_FUNCTION_ATTRIBUTE;
            for (int bit = 8; bit > 0; bit >>= 1) {
                if (!(flags & bit)) {
                    continue;
                }
                ins.oparg = bit;
                if (cdyn_instrs_append(out, &ins) < 0) {
                    goto error;
                }
            }
            continue;
        }
#endif
        default:
            break;
        }
        if (cdyn_instrs_append(out, &ins) < 0) {
            goto error;
        }
    }
    return finish_rewrite(out, map, n, 1);

error:
    return finish_rewrite(out, map, n, 0);
}

/* ---------------------------------------------------------------- stack depth */

/* Record that instruction i is entered at depth d. Pushes i on the work stack the first
 * time; 0, or -1 with an exception when an earlier path reached i at another depth. */
static int depth_visit(int *depth, Py_ssize_t *work, Py_ssize_t *nwork, Py_ssize_t i, int d)
{
    if (d < 0) {
        PyErr_Format(PyExc_ValueError, "stack underflow entering instruction %zd", i);
        return -1;
    }
    if (depth[i] < 0) {
        depth[i] = d;
        work[(*nwork)++] = i;
        return 0;
    }
    if (depth[i] != d) {
        PyErr_Format(PyExc_ValueError,
                     "instruction %zd is reached at stack depths %d and %d", i, depth[i], d);
        return -1;
    }
    return 0;
}

/* Exact maximum stack depth by flow analysis over real instructions, jumps and handlers.
 * Each instruction is entered at one depth (checked); handlers at depth + lasti + 1. */
static int stackdepth_real(const cdyn_instr_list *instrs)
{
    int *depth = NULL;
    Py_ssize_t *work = NULL, nwork = 0;
    Py_ssize_t n = instrs->len;
    int maxdepth = 0, rc = -1;

    if (n == 0) {
        return 0;
    }
    depth = PyMem_Malloc(sizeof(int) * (size_t)n);
    work = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)n);
    if (depth == NULL || work == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        depth[i] = -1;
    }
    if (depth_visit(depth, work, &nwork, 0, 0) < 0) {
        goto cleanup;
    }
    while (nwork > 0) {
        Py_ssize_t i = work[--nwork];
        int d = depth[i];
        for (;;) {
            const cdyn_instr *ins = &instrs->items[i];
            int effect, after;
            if (ins->exc_handler >= 0) {
                int hd = ins->exc_depth + ins->exc_lasti + 1;
                if (ins->exc_handler >= n) {
                    PyErr_Format(PyExc_ValueError, "instruction %zd: handler out of range", i);
                    goto cleanup;
                }
                maxdepth = Py_MAX(maxdepth, hd);
                if (depth_visit(depth, work, &nwork, ins->exc_handler, hd) < 0) {
                    goto cleanup;
                }
            }
            effect = cdyn_stack_effect(ins->opcode, ins->oparg, 0);
            if (effect == PY_INVALID_STACK_EFFECT) {
                PyErr_Format(PyExc_ValueError, "instruction %zd: no stack effect for opcode %d",
                             i, ins->opcode);
                goto cleanup;
            }
            after = d + effect;
            if (after < 0) {
                PyErr_Format(PyExc_ValueError, "stack underflow at instruction %zd (%s)", i,
                             cdyn_opname(ins->opcode));
                goto cleanup;
            }
            maxdepth = Py_MAX(maxdepth, after);
            if (cdyn_is_jump(ins->opcode)) {
                int jd = d + cdyn_stack_effect(ins->opcode, ins->oparg, 1);
                if (ins->target < 0 || ins->target >= n) {
                    PyErr_Format(PyExc_ValueError, "instruction %zd: jump target out of range",
                                 i);
                    goto cleanup;
                }
                maxdepth = Py_MAX(maxdepth, jd);
                if (depth_visit(depth, work, &nwork, ins->target, jd) < 0) {
                    goto cleanup;
                }
            }
            if (cdyn_is_terminator(ins->opcode)) {
                break;
            }
            if (++i >= n) {
                PyErr_SetString(PyExc_ValueError, "control falls off the end of the code");
                goto cleanup;
            }
            d = after;
            if (depth[i] >= 0) {
                if (depth_visit(depth, work, &nwork, i, d) < 0) {
                    goto cleanup;
                }
                break;
            }
            depth[i] = d;
        }
    }
    rc = maxdepth;

cleanup:
    PyMem_Free(depth);
    PyMem_Free(work);
    return rc;
}

int cdyn_stackdepth(const cdyn_instr_list *instrs)
{
    cdyn_instr_list real;
    int depth = denormalize(instrs, &real) < 0 ? -1 : stackdepth_real(&real);
    cdyn_instrs_clear(&real);
#if PY_VERSION_HEX >= 0x030D0000
    depth = depth == 0 ? 1 : depth;   /* 3.13's code objects have a stack of one at least */
#endif
    return depth;
}

/* ---------------------------------------------------------------- assemble */

/* EXTENDED_ARG prefixes needed for arg. */
static int ext_count(unsigned int arg)
{
    return arg > 0xFFFFFFu ? 3 : arg > 0xFFFFu ? 2 : arg > 0xFFu ? 1 : 0;
}

/* Layout of an instruction list being assembled (all arrays of length n, owned). */
typedef struct {
    Py_ssize_t n;
    int *op;               /* opcode after direction fix-up */
    unsigned int *arg;     /* final oparg */
    int *size;             /* code units: prefixes + 1 + caches */
    int *start;            /* first code unit of each instruction */
    Py_ssize_t nunits;     /* total code units */
} layout;

/* Free a layout's arrays (safe to call twice). */
static void layout_free(layout *lay)
{
    PyMem_Free(lay->op);
    PyMem_Free(lay->arg);
    PyMem_Free(lay->size);
    PyMem_Free(lay->start);
    lay->op = NULL;
    lay->arg = NULL;
    lay->size = NULL;
    lay->start = NULL;
}

/* Check instrs and compute its layout: jump opcodes turned to the direction of their
 * target, sizes grown from the minimum to the least fixed point (a jump whose argument
 * needs another EXTENDED_ARG moves everything after it), and all arguments. 0, or -1 with
 * an exception (lay is then freed). */
static int layout_compute(const cdyn_instr_list *instrs, layout *lay)
{
    Py_ssize_t n = instrs->len;
    int changed = 1;

    lay->n = n;
    lay->nunits = 0;
    lay->op = PyMem_Malloc(sizeof(int) * (size_t)(n + 1));
    lay->arg = PyMem_Malloc(sizeof(unsigned int) * (size_t)(n + 1));
    lay->size = PyMem_Malloc(sizeof(int) * (size_t)(n + 1));
    lay->start = PyMem_Malloc(sizeof(int) * (size_t)(n + 1));
    if (lay->op == NULL || lay->arg == NULL || lay->size == NULL || lay->start == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const cdyn_instr *ins = &instrs->items[i];
        int op = ins->opcode;
        if (op == CACHE || op == EXTENDED_ARG || !cdyn_opcode_known(op)) {
            PyErr_Format(PyExc_ValueError, "instruction %zd: opcode %d cannot be assembled", i,
                         op);
            goto error;
        }

        if (ins->exc_handler < -1 || ins->exc_handler >= n || ins->exc_depth < 0 ||
            (ins->exc_lasti != 0 && ins->exc_lasti != 1)) {
            PyErr_Format(PyExc_ValueError, "instruction %zd: bad exception handler entry", i);
            goto error;
        }
        if (cdyn_is_jump(op)) {
            if (ins->target < 0 || ins->target >= n) {
                PyErr_Format(PyExc_ValueError, "instruction %zd (%s): target %d out of range",
                             i, cdyn_opname(op), ins->target);
                goto error;
            }
            if (op == FOR_ITER && CDYN_FOR_ITER_SKIPS > 0 &&
                cdyn_for_iter_exit(instrs, ins->target) != ins->target + CDYN_FOR_ITER_SKIPS) {
                PyErr_Format(PyExc_ValueError, "instruction %zd: FOR_ITER must target the "
                             "END_FOR its exit skips", i);
                goto error;
            }
            op = jump_in_direction(op, ins->target <= i);
            if (op < 0) {
                PyErr_Format(PyExc_ValueError, "instruction %zd (%s) cannot jump backwards",
                             i, cdyn_opname(ins->opcode));
                goto error;
            }
            lay->arg[i] = 0;
        }
        else {
            if (ins->oparg < 0) {
                PyErr_Format(PyExc_ValueError, "instruction %zd (%s): negative oparg %d", i,
                             cdyn_opname(op), ins->oparg);
                goto error;
            }
            lay->arg[i] = (unsigned int)ins->oparg;
        }
        if (cdyn_op_native(op) < 0) {
            PyErr_Format(PyExc_ValueError, "instruction %zd: %s is no opcode of this Python",
                         i, cdyn_opname(op));
            goto error;
        }
        lay->op[i] = op;
        lay->size[i] = Py_MAX(ext_count(lay->arg[i]), cdyn_is_jump(op) ? ins->ext : 0) + 1 +
                       cdyn_cache_size(op);
    }
    /* Sizes only grow, so this ends (at most 3 EXTENDED_ARGs per jump). */
    while (changed) {
        Py_ssize_t total = 0;
        changed = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            lay->start[i] = (int)total;
            total += lay->size[i];
            if (total > INT_MAX / 2) {
                PyErr_SetString(PyExc_OverflowError, "assembled code too large");
                goto error;
            }
        }
        lay->nunits = total;
        for (Py_ssize_t i = 0; i < n; i++) {
            int next, dest, size;
            if (!cdyn_is_jump(lay->op[i])) {
                continue;
            }
            next = lay->start[i] + lay->size[i];
            dest = lay->start[instrs->items[i].target];
            lay->arg[i] = (unsigned int)(is_backward_jump(lay->op[i]) ? next - dest
                                                                       : dest - next);
            size = ext_count(lay->arg[i]) + 1 + cdyn_cache_size(lay->op[i]);
            if (size > lay->size[i]) {
                lay->size[i] = size;
                changed = 1;
            }
        }
    }
    return 0;

error:
    layout_free(lay);
    return -1;
}

/* co_code for a computed layout (new reference), or NULL. */
static PyObject *emit_code(const layout *lay)
{
    bytebuf b = {NULL, 0, 0};
    for (Py_ssize_t i = 0; i < lay->n; i++) {
        int ncache = cdyn_cache_size(lay->op[i]);
        int nprefix = lay->size[i] - 1 - ncache;
        unsigned int arg = lay->arg[i];
        assert(nprefix >= ext_count(arg) && nprefix <= 3);
        for (int k = nprefix; k > 0; k--) {
            if (buf_put(&b, (unsigned int)cdyn_op_native(EXTENDED_ARG)) < 0 ||
                buf_put(&b, arg >> (8 * k)) < 0) {
                goto error;
            }
        }
        if (buf_put(&b, (unsigned int)cdyn_op_native(lay->op[i])) < 0 || buf_put(&b, arg) < 0) {
            goto error;
        }
        for (int k = 0; k < ncache; k++) {
            if (buf_put(&b, 0) < 0 || buf_put(&b, 0) < 0) {   /* CACHE is 0 everywhere */
                goto error;
            }
        }
    }
    return buf_finish(&b);

error:
    PyMem_Free(b.data);
    return NULL;
}

/* Line-table varint, least significant chunk first. */
static int put_varint_lsb(bytebuf *b, unsigned int val)
{
    while (val >= 64) {
        if (buf_put(b, 64u | (val & 63u)) < 0) {
            return -1;
        }
        val >>= 6;
    }
    return buf_put(b, val);
}

/* Line-table signed varint: magnitude shifted left, sign in the low bit. */
static int put_svarint_lsb(bytebuf *b, int val)
{
    unsigned int u = val < 0 ? (((unsigned int)-(long)val) << 1) | 1u : (unsigned int)val << 1;
    return put_varint_lsb(b, u);
}

/* One line-table entry of 1..8 code units with the position of *loc. *line is the line
 * the previous entry left (updated). Picks the shortest form, as CPython's compiler does. */
static int put_location(bytebuf *b, const cdyn_instr *loc, int length, int *line)
{
    int delta, col = loc->col, end_col = loc->end_col;
    assert(length >= 1 && length <= 8);
    if (loc->lineno < 0) {
        return buf_put(b, 0x80u | (15u << 3) | (unsigned int)(length - 1));
    }
    delta = loc->lineno - *line;
    *line = loc->lineno;
    if (col < 0 || end_col < 0) {
        if (loc->end_lineno == loc->lineno || loc->end_lineno < 0) {
            if (buf_put(b, 0x80u | (13u << 3) | (unsigned int)(length - 1)) < 0) {
                return -1;
            }
            return put_svarint_lsb(b, delta);
        }
    }
    else if (loc->end_lineno == loc->lineno) {
        if (delta == 0 && col < 80 && end_col >= col && end_col - col < 16) {
            if (buf_put(b, 0x80u | ((unsigned int)(col / 8) << 3) |
                               (unsigned int)(length - 1)) < 0) {
                return -1;
            }
            return buf_put(b, ((unsigned int)(col % 8) << 4) | (unsigned int)(end_col - col));
        }
        if (delta >= 0 && delta < 3 && col < 128 && end_col < 128) {
            if (buf_put(b, 0x80u | ((unsigned int)(10 + delta) << 3) |
                               (unsigned int)(length - 1)) < 0 ||
                buf_put(b, (unsigned int)col) < 0) {
                return -1;
            }
            return buf_put(b, (unsigned int)end_col);
        }
    }
    if (buf_put(b, 0x80u | (14u << 3) | (unsigned int)(length - 1)) < 0 ||
        put_svarint_lsb(b, delta) < 0 ||
        put_varint_lsb(b, (unsigned int)(loc->end_lineno - loc->lineno)) < 0 ||
        put_varint_lsb(b, (unsigned int)(col + 1)) < 0) {
        return -1;
    }
    return put_varint_lsb(b, (unsigned int)(end_col + 1));
}

/* 1 when a and b have the same position. */
static int same_position(const cdyn_instr *a, const cdyn_instr *b)
{
    return a->lineno == b->lineno && a->end_lineno == b->end_lineno && a->col == b->col &&
           a->end_col == b->end_col;
}

/* co_linetable (new reference) or NULL, in entries of at most 8 units (EXTENDED_ARG prefixes
 * and caches included). CPython 3.11.7's compiler gives each instruction entries of its own;
 * since 3.12 a run of instructions with one position shares them (CDYN_LINETABLE_MERGES).
 * Doing the same, a round trip reproduces co_linetable byte for byte. */
static PyObject *emit_linetable(const cdyn_instr_list *instrs, const layout *lay,
                                int firstlineno)
{
    bytebuf b = {NULL, 0, 0};
    int line = firstlineno;
    Py_ssize_t i = 0;
    while (i < instrs->len) {
        const cdyn_instr *loc = &instrs->items[i];
        int run = lay->size[i++];
        while (CDYN_LINETABLE_MERGES && i < instrs->len && same_position(loc, &instrs->items[i])) {
            run += lay->size[i++];
        }
        while (run > 0) {
            int len = run > 8 ? 8 : run;
            if (put_location(&b, loc, len, &line) < 0) {
                goto error;
            }
            run -= len;
        }
    }
    return buf_finish(&b);

error:
    PyMem_Free(b.data);
    return NULL;
}

/* Exception-table varint, most significant chunk first; `flag` (0x80 or 0) marks an
 * entry's first byte. */
static int put_varint_msb(bytebuf *b, unsigned int val, unsigned int flag)
{
    int shift = 0;
    while (shift + 6 < 32 && (val >> (shift + 6)) != 0) {
        shift += 6;
    }
    for (; shift > 0; shift -= 6) {
        if (buf_put(b, flag | 64u | ((val >> shift) & 63u)) < 0) {
            return -1;
        }
        flag = 0;
    }
    return buf_put(b, flag | (val & 63u));
}

/* 1 when a and b are covered by the same exception-table entry kind. */
static int same_handler(const cdyn_instr *a, const cdyn_instr *b)
{
    return a->exc_handler == b->exc_handler &&
           (a->exc_handler < 0 ||
            (a->exc_depth == b->exc_depth && a->exc_lasti == b->exc_lasti));
}

/* co_exceptiontable (new reference) or NULL: consecutive instructions sharing handler,
 * depth and lasti become one entry. */
static PyObject *emit_exceptiontable(const cdyn_instr_list *instrs, const layout *lay)
{
    bytebuf b = {NULL, 0, 0};
    Py_ssize_t i = 0;
    while (i < instrs->len) {
        const cdyn_instr *first = &instrs->items[i];
        int start = lay->start[i], end;
        while (i < instrs->len && same_handler(first, &instrs->items[i])) {
            i++;
        }
        if (first->exc_handler < 0) {
            continue;
        }
        end = (i < instrs->len) ? lay->start[i] : (int)lay->nunits;
        if (put_varint_msb(&b, (unsigned int)start, 0x80u) < 0 ||
            put_varint_msb(&b, (unsigned int)(end - start), 0) < 0 ||
            put_varint_msb(&b, (unsigned int)lay->start[first->exc_handler], 0) < 0 ||
            put_varint_msb(&b, ((unsigned int)first->exc_depth << 1) |
                                   (unsigned int)first->exc_lasti, 0) < 0) {
            goto error;
        }
    }
    return buf_finish(&b);

error:
    PyMem_Free(b.data);
    return NULL;
}

/* Take a tuple field from spec or base (new reference), or NULL. */
static PyObject *spec_tuple(PyObject *given, PyObject *(*from_base)(PyCodeObject *),
                            PyCodeObject *base, const char *what)
{
    PyObject *res = NULL;
    if (given != NULL) {
        res = Py_NewRef(given);
    }
    else {
        res = from_base(base);
        if (res == NULL) {
            return NULL;
        }
    }
    if (!PyTuple_Check(res)) {
        PyErr_Format(PyExc_TypeError, "cdyn_assemble: %s must be a tuple, not %.100s", what,
                     Py_TYPE(res)->tp_name);
        Py_DECREF(res);
        return NULL;
    }
    return res;
}

/* co_consts / co_names of co (new references), shaped like PyCode_GetVarnames. */
static PyObject *base_consts(PyCodeObject *co) { return Py_NewRef(co->co_consts); }
static PyObject *base_names(PyCodeObject *co) { return Py_NewRef(co->co_names); }

/* Assemble instrs (unchanged) into a new code object described by spec (new reference),
 * or NULL with an exception. */
PyObject *cdyn_assemble(const cdyn_instr_list *instrs, const cdyn_code_spec *spec)
{
    layout lay = {0, NULL, NULL, NULL, NULL, 0};
    PyObject *code = NULL, *linetable = NULL, *exctable = NULL;
    PyObject *consts = NULL, *names = NULL, *varnames = NULL, *cellvars = NULL,
             *freevars = NULL;
    PyObject *result = NULL;
    PyCodeObject *base = spec->base;
    int stacksize, firstlineno;
    cdyn_instr_list real;

    cdyn_instrs_init(&real);

    if (base == NULL || !PyCode_Check(base)) {
        PyErr_SetString(PyExc_TypeError, "cdyn_assemble: spec->base must be a code object");
        goto cleanup;
    }
    if (instrs->len == 0) {
        PyErr_SetString(PyExc_ValueError, "cdyn_assemble: no instructions");
        goto cleanup;
    }
    firstlineno = spec->firstlineno >= 0 ? spec->firstlineno : base->co_firstlineno;
    for (Py_ssize_t i = 0; i < instrs->len; i++) {
        if (!cdyn_opcode_known(instrs->items[i].opcode)) {
            PyErr_Format(PyExc_ValueError, "instruction %zd: opcode %d (%s) cannot be assembled "
                         "on this Python", i, instrs->items[i].opcode,
                         cdyn_opname(instrs->items[i].opcode) ? cdyn_opname(instrs->items[i].opcode) : "?");
            goto cleanup;
        }
    }
    if (denormalize(instrs, &real) < 0) {
        goto cleanup;
    }
    instrs = &real;
    if (layout_compute(instrs, &lay) < 0) {
        goto cleanup;
    }
    code = emit_code(&lay);
    if (code == NULL) {
        goto cleanup;
    }
    linetable = emit_linetable(instrs, &lay, firstlineno);
    if (linetable == NULL) {
        goto cleanup;
    }
    exctable = emit_exceptiontable(instrs, &lay);
    if (exctable == NULL) {
        goto cleanup;
    }
    stacksize = stackdepth_real(instrs);
    if (stacksize < 0) {
        goto cleanup;
    }
    consts = spec_tuple(spec->consts, base_consts, base, "consts");
    if (consts == NULL) {
        goto cleanup;
    }
    names = spec_tuple(spec->names, base_names, base, "names");
    if (names == NULL) {
        goto cleanup;
    }
    varnames = spec_tuple(spec->varnames, PyCode_GetVarnames, base, "varnames");
    if (varnames == NULL) {
        goto cleanup;
    }
    cellvars = spec_tuple(spec->cellvars, PyCode_GetCellvars, base, "cellvars");
    if (cellvars == NULL) {
        goto cleanup;
    }
    freevars = spec_tuple(spec->freevars, PyCode_GetFreevars, base, "freevars");
    if (freevars == NULL) {
        goto cleanup;
    }
    result = (PyObject *)cdyn_code_new(
        spec->argcount >= 0 ? spec->argcount : base->co_argcount,
        spec->posonlyargcount >= 0 ? spec->posonlyargcount : base->co_posonlyargcount,
        spec->kwonlyargcount >= 0 ? spec->kwonlyargcount : base->co_kwonlyargcount,
        (int)PyTuple_GET_SIZE(varnames), stacksize,
        spec->flags >= 0 ? spec->flags : base->co_flags, code, consts, names, varnames,
        freevars, cellvars, base->co_filename, spec->name ? spec->name : base->co_name,
        spec->qualname ? spec->qualname : base->co_qualname, firstlineno, linetable,
        exctable);

cleanup:
    layout_free(&lay);
    cdyn_instrs_clear(&real);
    Py_XDECREF(code);
    Py_XDECREF(linetable);
    Py_XDECREF(exctable);
    Py_XDECREF(consts);
    Py_XDECREF(names);
    Py_XDECREF(varnames);
    Py_XDECREF(cellvars);
    Py_XDECREF(freevars);
    return result;
}

/* ---- direct plans ------------------------------------------------------------------- */

/* Match the instructions of l from *i on: the STORE_FASTs after UNPACK_SEQUENCE and the
 * LOAD_FASTs of the return into out; 1 when they match, else 0. */
static int
plan_tail(const cdyn_instr_list *l, Py_ssize_t i, cdyn_direct_plan *out)
{
    int stored[CDYN_PLAN_MAX];
    const cdyn_instr *it = l->items;
    if (i >= l->len || it[i].opcode != UNPACK_SEQUENCE || it[i].oparg > CDYN_PLAN_MAX) {
        return 0;
    }
    out->nunpack = it[i++].oparg;
    for (int k = 0; k < out->nunpack; k++, i++) {
        if (i >= l->len || it[i].opcode != STORE_FAST) {
            return 0;
        }
        stored[k] = it[i].oparg;
        for (int j = 0; j < k; j++) {
            if (stored[j] == stored[k]) {
                return 0;
            }
        }
    }
    out->nret = 0;
    for (; i < l->len && it[i].opcode == LOAD_FAST && out->nret < CDYN_PLAN_MAX; i++) {
        int pos = -1;
        for (int k = 0; k < out->nunpack; k++) {
            pos = stored[k] == it[i].oparg ? k : pos;
        }
        if (pos < 0) {
            return 0;
        }
        out->ret[out->nret++] = pos;
    }
    out->ret_tuple = i < l->len && it[i].opcode == BUILD_TUPLE;
    if (out->ret_tuple ? it[i].oparg != out->nret : out->nret != 1) {
        return 0;
    }
    i += out->ret_tuple;
    return i == l->len - 1 && it[i].opcode == RETURN_VALUE;
}

/* The LOAD_CONST of a callable pushed with its NULL at instruction i of l (PUSH_NULL first
 * or second, CDYN_NULL_FIRST): its index, or -1. */
static Py_ssize_t
plan_callee(const cdyn_instr_list *l, Py_ssize_t i)
{
    const cdyn_instr *it = l->items;
    if (i + 1 >= l->len) {
        return -1;
    }
    if (CDYN_NULL_FIRST ? it[i].opcode == PUSH_NULL && it[i + 1].opcode == LOAD_CONST
                        : it[i].opcode == LOAD_CONST && it[i + 1].opcode == PUSH_NULL) {
        return CDYN_NULL_FIRST ? i + 1 : i;
    }
    return -1;
}

/* The instructions of a call of nargs positional arguments at i of l (PRECALL n, CALL n on
 * 3.11; CALL n since): how many, or 0 when none stands there. */
static int
plan_call_at(const cdyn_instr_list *l, Py_ssize_t i, int nargs)
{
    const cdyn_instr *it = l->items;
    int pre = i < l->len && it[i].opcode == PRECALL;
    if (pre && it[i].oparg != nargs) {
        return 0;
    }
    i += pre;
    return i < l->len && it[i].opcode == CALL && it[i].oparg == nargs ? 1 + pre : 0;
}

/* One <arg> of the plan's call at instruction i (see bytecode.h): appended to out, and the
 * number of instructions it takes returned; 0 when none starts there. */
static int
plan_arg(PyCodeObject *co, const cdyn_instr_list *l, Py_ssize_t i, cdyn_direct_plan *out)
{
    const cdyn_instr *it = l->items;
    Py_ssize_t callee = plan_callee(l, i);
    int ncall;
    if (i < l->len && it[i].opcode == LOAD_FAST && it[i].oparg < co->co_argcount &&
        out->nargs < CDYN_PLAN_ARGS) {
        out->in[out->nin++] = it[i].oparg;
        out->nargs++;
        return 1;
    }
    if (callee < 0 || i + 3 >= l->len || out->nload >= CDYN_PLAN_LOADS ||
        it[i + 2].opcode != LOAD_FAST || it[i + 2].oparg >= co->co_argcount ||
        (ncall = plan_call_at(l, i + 3, 1)) == 0 || i + 3 + ncall >= l->len) {
        return 0;
    }
    const cdyn_instr *unpack = &it[i + 3 + ncall];
    if (unpack->opcode != UNPACK_SEQUENCE || unpack->oparg < 1 ||
        out->nargs + unpack->oparg > CDYN_PLAN_ARGS) {
        return 0;
    }
    out->load[out->nload].fn = PyTuple_GET_ITEM(co->co_consts, it[callee].oparg);
    out->load[out->nload].slot = it[i + 2].oparg;
    out->load[out->nload].n = unpack->oparg;
    out->in[out->nin++] = -1 - out->nload;
    out->nargs += unpack->oparg;
    out->nload++;
    return 4 + ncall;
}

int
cdyn_direct_plan_of(PyCodeObject *co, cdyn_direct_plan *out)
{
    cdyn_instr_list l;
    const cdyn_instr *it = NULL;
    Py_ssize_t i = 3;
    int ok = 0;
    if (co->co_ncellvars != 0 || co->co_nfreevars != 0 || cdyn_decode(co, &l) < 0) {
        return co->co_ncellvars != 0 || co->co_nfreevars != 0 ? 0 : -1;
    }
    it = l.items;
    for (Py_ssize_t k = 0; k < l.len; k++) {
        if (it[k].exc_handler >= 0) {
            goto done;
        }
    }
    if (l.len < 6 || it[0].opcode != RESUME || it[0].oparg != 0 || plan_callee(&l, 1) < 0) {
        goto done;
    }
    out->callee = PyTuple_GET_ITEM(co->co_consts, it[plan_callee(&l, 1)].oparg);
    out->nin = out->nload = out->nargs = 0;
    while (out->nin < CDYN_PLAN_MAX) {
        int step = plan_arg(co, &l, i, out);
        if (step <= 0) {
            break;
        }
        i += step;
    }
    int ncall = plan_call_at(&l, i, out->nargs);
    if (ncall == 0) {
        goto done;
    }
    out->lineno = it[i + ncall - 1].lineno;
    ok = plan_tail(&l, i + ncall, out);
done:
    cdyn_instrs_clear(&l);
    return ok;
}
