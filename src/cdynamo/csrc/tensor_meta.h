/* cdynamo._tensor_meta: the metadata TENSOR_MATCH compares, read through torch's C++ API.
 *
 * The one part of cdynamo built as C++ (tensor_meta.cpp, the extension cdynamo._tensor_meta):
 * torch gives a tensor's dispatch keys, dtype, device, requires_grad, sizes and strides, and
 * the thread's grad mode, to C++ through at::Tensor's accessors, the thread's local dispatch
 * key set and at::GradMode, but to C only through Python getters (about 40 ns each, and a
 * tuple of ints per shape). torch's own C++ tensor check (TensorCheck) is not exported, and
 * its Python entry TensorGuards.check costs about 1,300 instructions per call. The extension
 * exports the table below as the capsule "cdynamo._tensor_meta.api"; guards.c imports it once
 * (cdyn_guards_init) and keeps its Python-getter path and TensorGuards where it is absent.
 * No field of a torch struct is read in tensor_meta.cpp but through torch's own accessors.
 *
 * Ownership: every PyObject * argument is borrowed and no reference is returned. Every
 * function is called with the GIL held; no C++ exception crosses this interface.
 */
#ifndef CDYNAMO_TENSOR_META_H
#define CDYNAMO_TENSOR_META_H

#include <Python.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CDYN_TENSOR_META_CAPSULE "cdynamo._tensor_meta.api"
#define CDYN_TENSOR_META_VERSION 5

/* What TENSOR_MATCH compares besides sizes and strides (torch's TensorCheck compares the
 * same: dispatch keys, dtype, device index, requires_grad, ndim). */
typedef struct {
    uint64_t keys;          /* the tensor's dispatch key set with the thread's local
                               included / excluded sets applied, Python keys masked unless
                               the included set holds the Python key (a dispatch mode is
                               active); its raw representation */
    int32_t ndim;
    int16_t dtype;          /* c10::ScalarType */
    int8_t device_type;     /* c10::DeviceType */
    int8_t device_index;    /* -1: none */
    int8_t requires_grad;
    int8_t inference;       /* an inference tensor (made under torch.inference_mode): compared
                               by match() whatever the flags, as the dispatch keys of
                               torch's TensorCheck tell it (keys read here depend on the
                               thread's state when read, e.g. inside a traced body) */
    int8_t plain;           /* strided, not nested, no Python dispatch key, concrete sizes
                               and strides: match() and dims() apply to it */
    int8_t nested;          /* a nested tensor (torch's TensorCheck cannot read its sizes:
                               it throws a C++ exception that ends the process) */
} cdyn_tmeta;

/* match() flags */
#define CDYN_TM_KEYS 1      /* compare the dispatch keys too */

typedef struct {
    int version;            /* CDYN_TENSOR_META_VERSION */
    /* The metadata of t (torch._C.TensorBase or a subclass: the caller checks) into *m: 0, or
     * -1 with an exception set. */
    int (*read)(PyObject *t, cdyn_tmeta *m);
    /* The sizes and strides of t into sizes[0..n) / strides[0..n) (n: its ndim) and its
     * storage offset into *offset when offset is not NULL: 1; 0 when n differs or one is
     * symbolic (no exception); -1 with an exception set. */
    int (*dims)(PyObject *t, int n, int64_t *sizes, int64_t *strides, int64_t *offset);
    /* 1 when t (a plain tensor) has m's dtype, ndim, device and requires_grad (and dispatch
     * keys, with CDYN_TM_KEYS in flags), and each size i / stride i equals sizes[i] /
     * strides[i] where skip (may be NULL) has no mark (skip[i] for size i, skip[ndim + i]
     * for stride i); 0 when not. Never fails: a C++ error reads as 0, a guard failure. */
    int (*match)(PyObject *t, const cdyn_tmeta *m, const int64_t *sizes,
                 const int64_t *strides, const unsigned char *skip, int flags);
    /* at::GradMode::is_enabled() on this thread: 1 or 0. */
    int (*grad_enabled)(void);
    /* t.requires_grad: 1 or 0. Never fails (an error reads as -1, no exception set). */
    int (*requires_grad)(PyObject *t);
    /* The global torch state a graph depends on besides grad mode and autocast, packed into
     * one word (the CDYN_TS_* fields below): what torch._dynamo's GlobalStateGuard compares.
     * Never fails. */
    uint64_t (*torch_state)(void);
} cdyn_tensor_meta_api;

/* Fields of torch_state()'s word. */
#define CDYN_TS_DETERMINISTIC     (1u << 0)    /* torch.use_deterministic_algorithms(True) */
#define CDYN_TS_DETERMINISTIC_WARN (1u << 1)   /* ... warn_only=True */
#define CDYN_TS_CUBLAS_TF32       (1u << 2)    /* matmul TF32 (set_float32_matmul_precision) */
#define CDYN_TS_FP16_REDUCE_SHIFT 3            /* 2 bits: cuBLAS fp16 reduction option */
#define CDYN_TS_BF16_REDUCE_SHIFT 5            /* 2 bits: cuBLAS bf16 reduction option */
#define CDYN_TS_TF_STATE_SHIFT    8            /* 2 bits: __torch_function__ disabled state
                                                  (0 on, 1 subclasses off, 2 all off) */
#define CDYN_TS_TF_MODE           (1u << 10)   /* a TorchFunctionMode is on the stack */
#define CDYN_TS_DTYPE_SHIFT       16           /* 8 bits: the default dtype (ScalarType) */
#define CDYN_TS_THREADS_SHIFT     32           /* 32 bits: torch.get_num_threads() */

#ifdef __cplusplus
}
#endif

#endif /* CDYNAMO_TENSOR_META_H */
