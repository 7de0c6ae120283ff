use tensorasync::*;
fn rss_kb() -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines().find(|l| l.starts_with("VmRSS:")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap()
}
fn main() {
    let n = 1_000_000;
    let mode = std::env::args().nth(1).unwrap_or_default();
    if mode == "handles" {
        let r0 = rss_kb();
        let v: Vec<Tensor> =
            (0..n).map(|_| Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap()).collect();
        let r1 = rss_kb();
        println!("per tensor (Rust Vec<Tensor>): {:.0} B", (r1 - r0) as f64 * 1024.0 / n as f64 - 8.0);
        drop(v);
    } else {
        let rt = Runtime::new(2).unwrap();
        let t = Tensor::zeros(DType::F64, &[1], Order::RowMajor, Domain::Host).unwrap();
        let gate = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let g = gate.clone();
        ops::kernel(
            "block",
            &[(&t, Mode::Update)],
            KernelFn::new(move |_| {
                while !g.load(std::sync::atomic::Ordering::Acquire) {
                    std::thread::yield_now()
                }
                Ok(())
            }),
            Submit::on(&rt).detached(),
        )
        .unwrap();
        let r0 = rss_kb();
        for _ in 0..n {
            ops::kernel("k", &[(&t, Mode::Update)], KernelFn::inline(|_| Ok(())), Submit::on(&rt).detached()).unwrap();
        }
        let r1 = rss_kb();
        println!("per pending op: {:.0} B", (r1 - r0) as f64 * 1024.0 / n as f64);
        gate.store(true, std::sync::atomic::Ordering::Release);
        t.wait(None).unwrap();
    }
}
