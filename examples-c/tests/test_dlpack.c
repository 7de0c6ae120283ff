/* DLPack export (ta_tensor_to_dlpack, _legacy) and import
 * (ta_tensor_from_dlpack, _legacy), and layout identity with dlpack.h 1.x. */
#include "check.h"

#include <stddef.h>

/* dlpack.h 1.x, as published (only the parts used here), to compare layouts. */
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef enum { kDLCPU = 1, kDLCUDA = 2 } DLDeviceType;
typedef struct { DLDeviceType device_type; int32_t device_id; } DLDevice;
typedef enum { kDLInt = 0U, kDLUInt = 1U, kDLFloat = 2U, kDLComplex = 5U } DLDataTypeCode;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define SAME_FIELD(A, B, f) (offsetof(A, f) == offsetof(B, f) && sizeof(((A *)0)->f) == sizeof(((B *)0)->f))

static void check_layout(void) {
    CHECK(sizeof(ta_dl_version) == sizeof(DLPackVersion) && SAME_FIELD(ta_dl_version, DLPackVersion, major)
              && SAME_FIELD(ta_dl_version, DLPackVersion, minor), "DLPackVersion layout");
    CHECK(sizeof(ta_dl_device) == sizeof(DLDevice) && SAME_FIELD(ta_dl_device, DLDevice, device_type)
              && SAME_FIELD(ta_dl_device, DLDevice, device_id), "DLDevice layout");
    CHECK(sizeof(ta_dl_data_type) == sizeof(DLDataType) && SAME_FIELD(ta_dl_data_type, DLDataType, code)
              && SAME_FIELD(ta_dl_data_type, DLDataType, bits) && SAME_FIELD(ta_dl_data_type, DLDataType, lanes), "DLDataType layout");
    CHECK(sizeof(ta_dl_tensor) == sizeof(DLTensor) && SAME_FIELD(ta_dl_tensor, DLTensor, data) && SAME_FIELD(ta_dl_tensor, DLTensor, device)
              && SAME_FIELD(ta_dl_tensor, DLTensor, ndim) && SAME_FIELD(ta_dl_tensor, DLTensor, dtype)
              && SAME_FIELD(ta_dl_tensor, DLTensor, shape) && SAME_FIELD(ta_dl_tensor, DLTensor, strides)
              && SAME_FIELD(ta_dl_tensor, DLTensor, byte_offset), "DLTensor layout");
    CHECK(sizeof(ta_dl_managed_tensor) == sizeof(DLManagedTensor) && SAME_FIELD(ta_dl_managed_tensor, DLManagedTensor, dl_tensor)
              && SAME_FIELD(ta_dl_managed_tensor, DLManagedTensor, manager_ctx) && SAME_FIELD(ta_dl_managed_tensor, DLManagedTensor, deleter),
          "DLManagedTensor layout");
    CHECK(sizeof(ta_dl_managed_tensor_versioned) == sizeof(DLManagedTensorVersioned)
              && SAME_FIELD(ta_dl_managed_tensor_versioned, DLManagedTensorVersioned, version)
              && SAME_FIELD(ta_dl_managed_tensor_versioned, DLManagedTensorVersioned, manager_ctx)
              && SAME_FIELD(ta_dl_managed_tensor_versioned, DLManagedTensorVersioned, deleter)
              && SAME_FIELD(ta_dl_managed_tensor_versioned, DLManagedTensorVersioned, flags)
              && SAME_FIELD(ta_dl_managed_tensor_versioned, DLManagedTensorVersioned, dl_tensor), "DLManagedTensorVersioned layout");
    /* The x86_64/aarch64 numbers of dlpack.h itself. */
    CHECK(sizeof(DLTensor) == 48 && sizeof(DLManagedTensor) == 64 && sizeof(DLManagedTensorVersioned) == 80
              && offsetof(DLManagedTensorVersioned, dl_tensor) == 32 && offsetof(DLTensor, byte_offset) == 40, "dlpack.h sizes");
    CHECK(TA_DL_FLAG_READ_ONLY == DLPACK_FLAG_BITMASK_READ_ONLY && TA_DL_FLAG_IS_COPIED == DLPACK_FLAG_BITMASK_IS_COPIED
              && TA_DL_DEVICE_CPU == kDLCPU, "flag and device constants");
}

static ta_status fail_kernel(const ta_view *views, size_t nviews, void *userdata, ta_kernel_ctx *ctx) {
    (void)views; (void)nviews; (void)userdata;
    ta_kernel_set_error(ctx, "dlpack test failure");
    return 3;
}

static void *call_deleter(void *arg) {
    ta_dl_managed_tensor_versioned *m = (ta_dl_managed_tensor_versioned *)arg;
    m->deleter(m);
    return NULL;
}

/* A producer's managed tensor, for imports. */
static long g_deleted;
typedef struct producer {
    DLManagedTensorVersioned m;
    int64_t shape[2];
    int64_t strides[2];
    double data[6];
} producer;
static void producer_deleter(DLManagedTensorVersioned *self) {
    atomic_inc(&g_deleted);
    free(self->manager_ctx);
}
static long g_legacy_deleted;
static void legacy_deleter(DLManagedTensor *self) {
    atomic_inc(&g_legacy_deleted);
    (void)self;
}

int main(void) {
    check_layout();
    size_t ext[2] = { 2, 3 };
    double src[6] = { 1, 2, 3, 4, 5, 6 };
    ta_tensor *t = NULL;
    MUST(ta_tensor_new_copy(TA_DTYPE_F64, 2, ext, NULL, TA_ORDER_ROW_MAJOR, src, &t, NULL));

    /* A READ export: geometry, flags; a writer waits until the deleter runs (on another thread). */
    {
        ta_dl_managed_tensor_versioned *m = NULL;
        CHECK_STATUS(ta_tensor_to_dlpack(t, TA_MODE_READ, SECONDS(60), &m, NULL), TA_STATUS_OK);
        ta_dl_tensor *d = &m->dl_tensor;
        CHECK(m->version.major == 1 && m->flags == TA_DL_FLAG_READ_ONLY && m->deleter != NULL, "versioned header");
        CHECK(d->device.device_type == kDLCPU && d->ndim == 2 && d->dtype.code == kDLFloat && d->dtype.bits == 64 && d->dtype.lanes == 1,
              "device and dtype");
        CHECK(d->shape[0] == 2 && d->shape[1] == 3 && d->strides && d->strides[0] == 3 && d->strides[1] == 1 && d->byte_offset == 0,
              "shape and strides");
        const double *x = (const double *)d->data;
        CHECK(x[0] == 1 && x[5] == 6, "exported data");
        ta_event *fill = NULL;
        MUST(ta_fill(t, real(8), NULL, &fill, NULL));
        CHECK_STATUS(ta_event_wait(fill, SECONDS(0.05)), TA_STATUS_TIMEOUT);
        CHECK(x[0] == 1, "no write while the export lives");
        pthread_t th;
        pthread_create(&th, NULL, call_deleter, m);
        pthread_join(th, NULL);
        CHECK_STATUS(wait_event(fill, 60), TA_STATUS_OK);
        ta_event_free(fill);
        double out[6];
        read_back(t, NULL, out, 6);
        CHECK(out[0] == 8 && out[5] == 8, "the writer ran after the deleter");
    }

    /* A WRITE export of a transposed view: strides filled, writes land, no READ_ONLY flag. */
    {
        ta_tensor *tt = NULL;
        MUST(ta_tensor_transpose(t, &tt, NULL));
        ta_dl_managed_tensor_versioned *m = NULL;
        MUST(ta_tensor_to_dlpack(tt, TA_MODE_WRITE, SECONDS(60), &m, NULL));
        ta_dl_tensor *d = &m->dl_tensor;
        CHECK(m->flags == 0 && d->shape[0] == 3 && d->shape[1] == 2 && d->strides[0] == 1 && d->strides[1] == 3, "transposed export");
        double *x = (double *)d->data;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) x[i * d->strides[0] + j * d->strides[1]] = 10 * i + j;
        m->deleter(m);
        double out[6];
        read_back(t, NULL, out, 6);
        CHECK(out[0] == 0 && out[1] == 10 && out[2] == 20 && out[3] == 1 && out[4] == 11 && out[5] == 21, "written through the export");
        ta_tensor_free(tt);
    }

    /* Legacy export, freed after the tensor handle. */
    {
        ta_tensor *s = NULL;
        MUST(ta_tensor_share(t, &s));
        ta_dl_managed_tensor *m = NULL;
        CHECK_STATUS(ta_tensor_to_dlpack_legacy(s, TA_MODE_READ, SECONDS(60), &m, NULL), TA_STATUS_OK);
        ta_tensor_free(s);
        CHECK(m->dl_tensor.ndim == 2 && ((double *)m->dl_tensor.data)[1] == 10, "legacy export data");
        m->deleter(m);
    }

    /* Poisoned, conj, timeout. */
    {
        ta_tensor *p = zeros1(TA_DTYPE_F64, 2);
        ta_access a = { p, TA_MODE_WRITE };
        ta_event *fe = NULL;
        MUST(ta_kernel_submit(fail_kernel, NULL, "failing", &a, 1, NULL, &fe, NULL));
        ta_dl_managed_tensor_versioned *m = NULL;
        ta_error *e = NULL;
        CHECK_STATUS(ta_tensor_to_dlpack(p, TA_MODE_READ, SECONDS(60), &m, &e), TA_STATUS_KERNEL_FAILED);
        ta_error *e_op = event_error(fe);
        CHECK(m == NULL && err_same(e, e_op) == 1, "a poisoned export fails with the failing operation's error");
        ta_error_free(e);
        ta_error_free(e_op);
        ta_event_free(fe);
        ta_tensor_free(p);

        ta_tensor *c = zeros1(TA_DTYPE_C128, 2), *cj = NULL;
        MUST(ta_tensor_conj(c, &cj, NULL));
        CHECK_STATUS(ta_tensor_to_dlpack(cj, TA_MODE_READ, 0, &m, NULL), TA_STATUS_UNSUPPORTED);
        CHECK_STATUS(ta_tensor_to_dlpack(cj, TA_MODE_WRITE, 0, &m, NULL), TA_STATUS_UNSUPPORTED);
        MUST(ta_tensor_to_dlpack(c, TA_MODE_READ, SECONDS(60), &m, NULL));
        CHECK(m->dl_tensor.dtype.code == kDLComplex && m->dl_tensor.dtype.bits == 128, "complex dtype");
        ta_dl_managed_tensor_versioned *m2 = NULL;
        CHECK_STATUS(ta_tensor_to_dlpack(c, TA_MODE_WRITE, SECONDS(0.02), &m2, NULL), TA_STATUS_TIMEOUT);
        CHECK(m2 == NULL, "nothing exported on timeout");
        m->deleter(m);
        ta_tensor_free(cj);
        ta_tensor_free(c);
        CHECK_STATUS(ta_tensor_to_dlpack(t, TA_MODE_READ, 0, NULL, NULL), TA_STATUS_NULL_POINTER);
    }

    /* Import: zero-copy, the deleter called once after the last access. */
    {
        producer *pr = calloc(1, sizeof *pr);
        pr->m.version.major = 1;
        pr->m.manager_ctx = pr;
        pr->m.deleter = producer_deleter;
        pr->m.dl_tensor.data = pr->data;
        pr->m.dl_tensor.device.device_type = kDLCPU;
        pr->m.dl_tensor.ndim = 2;
        pr->m.dl_tensor.dtype.code = kDLFloat;
        pr->m.dl_tensor.dtype.bits = 64;
        pr->m.dl_tensor.dtype.lanes = 1;
        pr->shape[0] = 3;
        pr->shape[1] = 2;
        pr->m.dl_tensor.shape = pr->shape;
        pr->m.dl_tensor.strides = NULL;
        for (int i = 0; i < 6; i++) pr->data[i] = i + 0.5;
        /* A device tensor is refused, and the deleter is not called. */
        pr->m.dl_tensor.device.device_type = kDLCUDA;
        ta_tensor *u = NULL;
        CHECK_STATUS(ta_tensor_from_dlpack((ta_dl_managed_tensor_versioned *)&pr->m, &u, NULL), TA_STATUS_DOMAIN_MISMATCH);
        pr->m.dl_tensor.device.device_type = kDLCPU;
        pr->m.dl_tensor.dtype.lanes = 2;
        CHECK_STATUS(ta_tensor_from_dlpack((ta_dl_managed_tensor_versioned *)&pr->m, &u, NULL), TA_STATUS_UNSUPPORTED);
        pr->m.dl_tensor.dtype.lanes = 1;
        CHECK(atomic_get(&g_deleted) == 0, "no deleter call on a failed import");
        CHECK_STATUS(ta_tensor_from_dlpack((ta_dl_managed_tensor_versioned *)&pr->m, &u, NULL), TA_STATUS_OK);
        size_t e[2];
        MUST(ta_tensor_extents(u, e, 2));
        CHECK(e[0] == 3 && e[1] == 2, "imported extents");
        gate g;
        gate_init(&g);
        ta_access a = { u, TA_MODE_UPDATE };
        MUST(ta_kernel_submit(gate_kernel, &g, "gated", &a, 1, NULL, NULL, NULL));
        ta_event *ev = NULL;
        MUST(ta_scale(u, real(2), NULL, &ev, NULL));
        ta_tensor_free(u);
        CHECK(atomic_get(&g_deleted) == 0, "the deleter waits for the last access");
        gate_open(&g);
        CHECK_STATUS(wait_event(ev, 60), TA_STATUS_OK);
        ta_event_free(ev);
        gate_destroy(&g);
        /* The release happens once the scale's task lets the memory go. */
        for (int i = 0; i < 60000 && atomic_get(&g_deleted) == 0; i++) sleep_ms(1);
        CHECK(atomic_get(&g_deleted) == 1, "the deleter ran once (%ld)", atomic_get(&g_deleted));
    }

    /* Round trip: our own export imported (read-only), the export held until the import's last access. */
    {
        ta_dl_managed_tensor_versioned *m = NULL;
        MUST(ta_tensor_to_dlpack(t, TA_MODE_READ, SECONDS(60), &m, NULL));
        ta_tensor *u = NULL;
        MUST(ta_tensor_from_dlpack(m, &u, NULL));
        int32_t ro = 0;
        MUST(ta_tensor_is_read_only(u, &ro));
        CHECK(ro == 1, "a READ_ONLY import is read-only");
        double out[6];
        read_back(u, NULL, out, 6);
        CHECK(out[1] == 10 && out[4] == 11, "round trip data");
        ta_event *fill = NULL;
        MUST(ta_fill(t, real(1), NULL, &fill, NULL));
        CHECK_STATUS(ta_event_poll(fill), TA_STATUS_PENDING);
        ta_tensor_free(u);
        CHECK_STATUS(wait_event(fill, 60), TA_STATUS_OK);
        ta_event_free(fill);
    }

    /* Legacy import. */
    {
        double mem[2] = { 3, 4 };
        int64_t shape[1] = { 2 };
        DLManagedTensor lm;
        memset(&lm, 0, sizeof lm);
        lm.dl_tensor.data = mem;
        lm.dl_tensor.device.device_type = kDLCPU;
        lm.dl_tensor.ndim = 1;
        lm.dl_tensor.dtype.code = kDLInt;
        lm.dl_tensor.dtype.bits = 64;
        lm.dl_tensor.dtype.lanes = 1;
        lm.dl_tensor.shape = shape;
        lm.deleter = legacy_deleter;
        ta_tensor *u = NULL;
        CHECK_STATUS(ta_tensor_from_dlpack_legacy((ta_dl_managed_tensor *)&lm, &u, NULL), TA_STATUS_OK);
        ta_dtype dt = 0;
        MUST(ta_tensor_dtype(u, &dt));
        CHECK(dt == TA_DTYPE_I64, "legacy import dtype");
        ta_tensor_free(u);
        CHECK(atomic_get(&g_legacy_deleted) == 1, "legacy deleter called once");
    }

    ta_tensor_free(t);
    return finish("test_dlpack");
}
