/* C consumer: C = A B on 2x2 matrices, checked by hand-computed values. */
#include <stdio.h>
#include <tensorasync.h>

int main(void) {
    double a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4] = {0};
    size_t ext[2] = {2, 2};
    ta_tensor *ta = NULL, *tb = NULL, *tc = NULL;
    ta_event *ev = NULL;
    if (ta_tensor_new_copy(TA_DTYPE_F64, 2, ext, NULL, TA_ORDER_ROW_MAJOR, a, &ta, NULL) ||
        ta_tensor_new_copy(TA_DTYPE_F64, 2, ext, NULL, TA_ORDER_ROW_MAJOR, b, &tb, NULL) ||
        ta_tensor_new(TA_DTYPE_F64, TA_DOMAIN_HOST, &tc, NULL) ||
        ta_assign_product(tc, (ta_scalar){1, 0}, ta, tb, NULL, NULL, NULL) ||
        ta_copy_out(tc, c, 4, NULL, NULL, &ev, NULL) || ta_event_wait(ev, TA_WAIT_FOREVER))
        return 1;
    ta_event_free(ev);
    ta_tensor_free(ta);
    ta_tensor_free(tb);
    ta_tensor_free(tc);
    int ok = c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50;
    printf("C consumer (tensorasync %s): %s\n", ta_version(), ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
