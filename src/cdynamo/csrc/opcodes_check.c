/* opcodes_check.c: the running version's opcode table (opcodes.h) against CPython's own
 * <opcode.h>, at compile time. Kept in a file of its own: <opcode.h>'s macros share their
 * names with the engine's cdyn_op enum, which this file does not include. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <opcode.h>

#define CDYN_OPCODES_TABLES_ONLY
#include "opcodes.h"

#define CDYN_CHECK_OPCODE(name, num, cache) \
    _Static_assert((name) == (num), "opcodes.h disagrees with <opcode.h> on " #name);
CDYN_NATIVE_OPS(CDYN_CHECK_OPCODE)
#undef CDYN_CHECK_OPCODE
#define CDYN_CHECK_NB(name, num) \
    _Static_assert((name) == (num), "opcodes.h disagrees with <opcode.h> on " #name);
CDYN_BINARY_OPS(CDYN_CHECK_NB)
#undef CDYN_CHECK_NB

/* A translation unit must declare something. */
extern int cdyn_opcodes_checked;
int cdyn_opcodes_checked = 1;
