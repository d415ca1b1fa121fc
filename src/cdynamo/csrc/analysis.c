/* analysis.c: liveness of local slots and loop detection over decoded instructions
 * (see analysis.h for the flow model and what counts as a read or a write). */
#include "analysis.h"

typedef uint64_t bits;
#define BITS_PER_WORD 64

/* Slots instruction ins reads (*use, or -1) and writes ([*def_lo, *def_hi), empty when
 * equal). 0, or -1 with ValueError when a slot index is outside [0, nlocals). */
static int slot_access(const cdyn_instr *ins, Py_ssize_t k, int nlocals, int *use,
                       int *def_lo, int *def_hi)
{
    int slot = ins->oparg;
    *use = -1;
    *def_lo = *def_hi = 0;
    switch (ins->opcode) {
    case LOAD_FAST:
    case LOAD_FAST_CHECK:
    case LOAD_FROM_DICT_OR_DEREF:
    case LOAD_CLOSURE:
    case LOAD_DEREF:
    case STORE_DEREF:
    case DELETE_DEREF:
    case LOAD_CLASSDEREF:
        *use = slot;
        break;
    case STORE_FAST:
        *def_lo = slot;
        *def_hi = slot + 1;
        break;
    case DELETE_FAST:
    case LOAD_FAST_AND_CLEAR:   /* reads the variable (it may be unbound) and unbinds it */
    case MAKE_CELL:
        *use = slot;
        *def_lo = slot;
        *def_hi = slot + 1;
        break;
    case COPY_FREE_VARS:
        *def_lo = nlocals - ins->oparg;
        *def_hi = nlocals;
        slot = *def_lo;
        break;
    default:
        return 0;
    }
    if (slot < 0 || slot >= nlocals || (*def_hi > nlocals)) {
        PyErr_Format(PyExc_ValueError, "instruction %zd (%s): slot %d outside the %d locals",
                     k, cdyn_opname(ins->opcode), ins->oparg, nlocals);
        return -1;
    }
    return 0;
}

/* 0 when every jump target and handler of instrs is in range, else -1 with ValueError. */
static int check_edges(const cdyn_instr_list *instrs)
{
    for (Py_ssize_t k = 0; k < instrs->len; k++) {
        const cdyn_instr *ins = &instrs->items[k];
        if ((cdyn_is_jump(ins->opcode) && (ins->target < 0 || ins->target >= instrs->len)) ||
            ins->exc_handler >= instrs->len) {
            PyErr_Format(PyExc_ValueError, "instruction %zd (%s): target or handler out of range",
                         k, cdyn_opname(ins->opcode));
            return -1;
        }
    }
    return 0;
}

/* Live slots at `start` by backward data flow to a fixed point (analysis.h). */
int cdyn_live_locals(const cdyn_instr_list *instrs, Py_ssize_t start, int nlocals,
                     unsigned char *live_out)
{
    Py_ssize_t n = instrs->len, nwords = (nlocals + BITS_PER_WORD - 1) / BITS_PER_WORD;
    bits *live = NULL, *scratch = NULL;
    int *use = NULL, *def_lo = NULL, *def_hi = NULL;
    int rc = -1, changed = 1;

    if (start < 0 || start >= n || nlocals < 0) {
        PyErr_Format(PyExc_ValueError, "cdyn_live_locals: start %zd outside %zd instructions",
                     start, n);
        goto cleanup;
    }
    if (check_edges(instrs) < 0) {
        goto cleanup;
    }
    if (nwords == 0) {
        rc = 0;
        goto cleanup;
    }
    live = PyMem_Calloc((size_t)(n * nwords), sizeof(bits));
    scratch = PyMem_Calloc((size_t)nwords, sizeof(bits));
    use = PyMem_Malloc(sizeof(int) * (size_t)n);
    def_lo = PyMem_Malloc(sizeof(int) * (size_t)n);
    def_hi = PyMem_Malloc(sizeof(int) * (size_t)n);
    if (live == NULL || scratch == NULL || use == NULL || def_lo == NULL || def_hi == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (slot_access(&instrs->items[k], k, nlocals, &use[k], &def_lo[k], &def_hi[k]) < 0) {
            goto cleanup;
        }
    }
    /* live[k] only grows, so the sweeps end. */
    while (changed) {
        changed = 0;
        for (Py_ssize_t k = n - 1; k >= 0; k--) {
            const cdyn_instr *ins = &instrs->items[k];
            bits *mine = &live[k * nwords];
            memset(scratch, 0, sizeof(bits) * (size_t)nwords);
            if (!cdyn_is_terminator(ins->opcode) && k + 1 < n) {
                for (Py_ssize_t w = 0; w < nwords; w++) {
                    scratch[w] |= live[(k + 1) * nwords + w];
                }
            }
            if (cdyn_is_jump(ins->opcode)) {
                for (Py_ssize_t w = 0; w < nwords; w++) {
                    scratch[w] |= live[(Py_ssize_t)ins->target * nwords + w];
                }
            }
            for (int s = def_lo[k]; s < def_hi[k]; s++) {
                scratch[s / BITS_PER_WORD] &= ~((bits)1 << (s % BITS_PER_WORD));
            }
            if (ins->exc_handler >= 0) {
                for (Py_ssize_t w = 0; w < nwords; w++) {
                    scratch[w] |= live[(Py_ssize_t)ins->exc_handler * nwords + w];
                }
            }
            if (use[k] >= 0) {
                scratch[use[k] / BITS_PER_WORD] |= (bits)1 << (use[k] % BITS_PER_WORD);
            }
            for (Py_ssize_t w = 0; w < nwords; w++) {
                if (scratch[w] != mine[w]) {
                    assert((scratch[w] & mine[w]) == mine[w]);   /* monotone */
                    mine[w] = scratch[w];
                    changed = 1;
                }
            }
        }
    }
    for (int s = 0; s < nlocals; s++) {
        live_out[s] = (unsigned char)((live[start * nwords + s / BITS_PER_WORD] >>
                                       (s % BITS_PER_WORD)) & 1u);
    }
    rc = 0;

cleanup:
    PyMem_Free(live);
    PyMem_Free(scratch);
    PyMem_Free(use);
    PyMem_Free(def_lo);
    PyMem_Free(def_hi);
    return rc;
}

/* Depth-first walk from start looking for a jump to an earlier (or the same) instruction. */
int cdyn_has_backward_jump(const cdyn_instr_list *instrs, Py_ssize_t start)
{
    Py_ssize_t n = instrs->len, nwork = 0;
    unsigned char *seen = NULL;
    Py_ssize_t *work = NULL;
    int rc = -1;

    if (start < 0 || start >= n) {
        PyErr_Format(PyExc_ValueError,
                     "cdyn_has_backward_jump: start %zd outside %zd instructions", start, n);
        goto cleanup;
    }
    if (check_edges(instrs) < 0) {
        goto cleanup;
    }
    seen = PyMem_Calloc((size_t)n, 1);
    work = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)n);
    if (seen == NULL || work == NULL) {
        PyErr_NoMemory();
        goto cleanup;
    }
    seen[start] = 1;
    work[nwork++] = start;
    rc = 0;
    while (nwork > 0 && rc == 0) {
        Py_ssize_t k = work[--nwork];
        const cdyn_instr *ins = &instrs->items[k];
        Py_ssize_t succ[3];
        int nsucc = 0;
        if (cdyn_is_jump(ins->opcode)) {
            if (ins->target <= k) {
                rc = 1;
                break;
            }
            succ[nsucc++] = ins->target;
        }
        if (!cdyn_is_terminator(ins->opcode) && k + 1 < n) {
            succ[nsucc++] = k + 1;
        }
        if (ins->exc_handler >= 0) {
            succ[nsucc++] = ins->exc_handler;
        }
        for (int j = 0; j < nsucc; j++) {
            if (!seen[succ[j]]) {
                seen[succ[j]] = 1;
                work[nwork++] = succ[j];
            }
        }
    }

cleanup:
    PyMem_Free(seen);
    PyMem_Free(work);
    return rc;
}

/* Contract: see analysis.h. */
int
cdyn_in_loop(const cdyn_instr_list *instrs, Py_ssize_t pc)
{
    for (Py_ssize_t j = pc < 0 ? 0 : pc; j < instrs->len; j++) {
        const cdyn_instr *in = &instrs->items[j];
        if (cdyn_is_jump(in->opcode) && in->target >= 0 && in->target <= pc) {
            return 1;
        }
    }
    return 0;
}
