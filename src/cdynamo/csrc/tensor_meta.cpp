/* cdynamo._tensor_meta: see tensor_meta.h. Only torch's public C++ API is used (the headers
 * torch ships for C++ extensions). */
#include "tensor_meta.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/python_variable.h>

namespace {

const c10::DispatchKeySet python_keys({c10::DispatchKey::Python,
                                        c10::DispatchKey::PythonTLSSnapshot,
                                        c10::DispatchKey::PythonDispatcher});

/* The key set TENSOR_MATCH compares. torch's LocalState::apply masks the Python keys unless
 * a Python mode that traces compile internals is active, a state torch does not export; here
 * they are kept whenever the thread's included set holds the Python key (a dispatch mode is
 * active), so a guard may fail where torch's passes (a recompile), never the reverse. */
uint64_t applied_keys(const at::Tensor &v)
{
    c10::impl::LocalDispatchKeySet tls = c10::impl::tls_local_dispatch_key_set();
    c10::DispatchKeySet ks = (v.key_set() | tls.included_) - tls.excluded_;
    if (!tls.included_.has(c10::DispatchKey::Python)) {
        ks = ks - python_keys;
    }
    return ks.raw_repr();
}

/* Inside a catch block: the Python RuntimeError for the C++ exception being handled
 * ("cdynamo: <what>: <its message>"); -1. */
int raise_current(const char *what)
{
    try {
        throw;
    }
    catch (const std::exception &e) {
        PyErr_Format(PyExc_RuntimeError, "cdynamo: %s: %s", what, e.what());
    }
    catch (...) {
        PyErr_Format(PyExc_RuntimeError, "cdynamo: %s failed", what);
    }
    return -1;
}

int read_meta(PyObject *t, cdyn_tmeta *m)
{
    try {
        const at::Tensor &v = THPVariable_Unpack(t);
        const c10::TensorImpl *impl = v.unsafeGetTensorImpl();
        m->keys = applied_keys(v);
        m->ndim = static_cast<int32_t>(v.dim());
        m->dtype = static_cast<int16_t>(v.scalar_type());
        m->device_type = static_cast<int8_t>(v.device().type());
        m->device_index = static_cast<int8_t>(v.device().index());
        m->requires_grad = v.requires_grad() ? 1 : 0;
        m->inference = v.is_inference() ? 1 : 0;
        m->nested = v.is_nested() ? 1 : 0;
        m->plain = v.layout() == c10::kStrided && !m->nested &&
                   !impl->is_python_dispatch() && !impl->has_symbolic_sizes_strides();
        return 0;
    }
    catch (...) {
        return raise_current("reading tensor metadata");
    }
}

int read_dims(PyObject *t, int n, int64_t *sizes, int64_t *strides, int64_t *offset)
{
    try {
        const at::Tensor &v = THPVariable_Unpack(t);
        if (v.dim() != n) {
            return 0;
        }
        c10::SymIntArrayRef sz = v.sym_sizes(), st = v.sym_strides();
        for (int i = 0; i < n; i++) {
            std::optional<int64_t> a = sz[i].maybe_as_int(), b = st[i].maybe_as_int();
            if (!a || !b) {
                return 0;
            }
            sizes[i] = *a;
            strides[i] = *b;
        }
        if (offset != nullptr) {
            std::optional<int64_t> o = v.sym_storage_offset().maybe_as_int();
            if (!o) {
                return 0;
            }
            *offset = *o;
        }
        return 1;
    }
    catch (...) {
        return raise_current("reading tensor sizes");
    }
}

int match(PyObject *t, const cdyn_tmeta *m, const int64_t *sizes, const int64_t *strides,
          const unsigned char *skip, int flags)
{
    try {
        const at::Tensor &v = THPVariable_Unpack(t);
        const c10::Device dev = v.device();
        if (static_cast<int16_t>(v.scalar_type()) != m->dtype || v.dim() != m->ndim ||
            static_cast<int8_t>(dev.type()) != m->device_type ||
            static_cast<int8_t>(dev.index()) != m->device_index ||
            (v.requires_grad() ? 1 : 0) != m->requires_grad ||
            (v.is_inference() ? 1 : 0) != m->inference ||
            ((flags & CDYN_TM_KEYS) && applied_keys(v) != m->keys)) {
            return 0;
        }
        const int n = m->ndim;
        /* sizes() / strides(): a tensor with symbolic or custom sizes raises (read as 0) */
        c10::IntArrayRef sz = v.sizes(), st = v.strides();
        for (int i = 0; i < n; i++) {
            if ((skip == nullptr || !skip[i]) && sz[i] != sizes[i]) {
                return 0;
            }
            if ((skip == nullptr || !skip[n + i]) && st[i] != strides[i]) {
                return 0;
            }
        }
        return 1;
    }
    catch (...) {
        return 0;
    }
}

int grad_enabled()
{
    return c10::GradMode::is_enabled() ? 1 : 0;
}

int requires_grad(PyObject *t)
{
    try {
        return THPVariable_Unpack(t).requires_grad() ? 1 : 0;
    }
    catch (...) {
        return -1;
    }
}

uint64_t torch_state()
{
    try {
        at::Context &ctx = at::globalContext();
        uint64_t w = 0;
        w |= ctx.deterministicAlgorithms() ? CDYN_TS_DETERMINISTIC : 0u;
        w |= ctx.deterministicAlgorithmsWarnOnly() ? CDYN_TS_DETERMINISTIC_WARN : 0u;
        w |= ctx.allowTF32CuBLAS() ? CDYN_TS_CUBLAS_TF32 : 0u;
        w |= (static_cast<uint64_t>(ctx.allowFP16ReductionCuBLAS()) & 3u)
             << CDYN_TS_FP16_REDUCE_SHIFT;
        w |= (static_cast<uint64_t>(ctx.allowBF16ReductionCuBLAS()) & 3u)
             << CDYN_TS_BF16_REDUCE_SHIFT;
        w |= (static_cast<uint64_t>(at::impl::PythonTorchFunctionTLS::get_disabled_state()) & 3u)
             << CDYN_TS_TF_STATE_SHIFT;
        w |= at::impl::torch_function_mode_enabled() ? CDYN_TS_TF_MODE : 0u;
        w |= (static_cast<uint64_t>(c10::get_default_dtype_as_scalartype()) & 0xffu)
             << CDYN_TS_DTYPE_SHIFT;
        w |= static_cast<uint64_t>(static_cast<uint32_t>(at::get_num_threads()))
             << CDYN_TS_THREADS_SHIFT;
        return w;
    }
    catch (...) {
        return ~static_cast<uint64_t>(0);   /* fails every comparison: a recompile */
    }
}

const cdyn_tensor_meta_api api = {
    CDYN_TENSOR_META_VERSION, read_meta, read_dims, match, grad_enabled, requires_grad,
    torch_state,
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "cdynamo._tensor_meta",
    "The metadata TENSOR_MATCH compares, through torch's C++ API: the capsule 'api' "
    "(tensor_meta.h), for cdynamo._C.",
    -1, nullptr, nullptr, nullptr, nullptr, nullptr,
};

}  // namespace

PyMODINIT_FUNC
PyInit__tensor_meta(void)
{
    PyObject *m = PyModule_Create(&module_def);
    PyObject *cap = nullptr;
    if (m == nullptr) {
        return nullptr;
    }
    cap = PyCapsule_New(const_cast<cdyn_tensor_meta_api *>(&api), CDYN_TENSOR_META_CAPSULE,
                        nullptr);
    if (cap == nullptr || PyModule_AddObject(m, "api", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
