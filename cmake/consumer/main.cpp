// C++ consumer: matmul and a kernel lambda through tensorasync.hpp.
#include <cstdio>
#include <tensorasync.hpp>

int main() {
    auto a = ta::tensor::copy_of(std::vector<double>{1, 2, 3, 4}, {2, 2});
    auto b = ta::tensor::copy_of(std::vector<double>{5, 6, 7, 8}, {2, 2});
    auto c = ta::matmul(a, b);
    const double bump = 0.5;
    ta::submit([bump](ta::view<double, 2> v) { v(1, 1) += bump; }, ta::inout(c));
    auto v = c.to_vector<double>();
    bool ok = v == std::vector<double>{19, 22, 43, 50.5};
    std::printf("C++ consumer (tensorasync %s): %s\n", ta::version(), ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
