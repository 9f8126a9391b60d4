//! The op codes the kernels take ([`crate::shared`] defines them for both sides), and the f32
//! arithmetic each applies, which the CPU reference shares.

pub use crate::shared::{BinaryOp, ReduceOp, ScalarOp, UnaryOp};

impl BinaryOp {
    /// Applies the operation in f32, as the kernel does.
    #[inline]
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Maximum => a.max(b),
            BinaryOp::Minimum => a.min(b),
            BinaryOp::Pow => a.powf(b),
            BinaryOp::Atan2 => a.atan2(b),
            BinaryOp::Lt => f32::from(u8::from(a < b)),
        }
    }
}

impl UnaryOp {
    /// Applies the operation in f32, as the CPU reference (computed in f64 and rounded).
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        let v = f64::from(x);
        let r = match self {
            UnaryOp::Neg => -v,
            UnaryOp::Abs => v.abs(),
            UnaryOp::Exp => v.exp(),
            UnaryOp::Log => v.ln(),
            UnaryOp::Sqrt => v.sqrt(),
            UnaryOp::Rsqrt => 1.0 / v.sqrt(),
            UnaryOp::Sin => v.sin(),
            UnaryOp::Cos => v.cos(),
            UnaryOp::Tanh => v.tanh(),
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-v).exp()),
            UnaryOp::Relu => v.max(0.0),
            UnaryOp::Relu2 => v.max(0.0) * v.max(0.0),
            // erf: musl's rational approximations (the `libm` crate), within 1 ulp in f64.
            UnaryOp::GeluErf => 0.5 * v * (1.0 + libm::erf(v / std::f64::consts::SQRT_2)),
            UnaryOp::GeluTanh => {
                let u = (2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v);
                0.5 * v * (1.0 + u.tanh())
            }
            UnaryOp::Silu => v / (1.0 + (-v).exp()),
            UnaryOp::Square => v * v,
            UnaryOp::Recip => 1.0 / v,
            UnaryOp::Round => v.round_ties_even(),
        };
        r as f32
    }
}

impl ScalarOp {
    /// Applies the operation in f32, as the kernel does.
    #[inline]
    pub fn apply(self, x: f32, s: f32) -> f32 {
        match self {
            ScalarOp::Add => x + s,
            ScalarOp::Mul => x * s,
            ScalarOp::Sub => x - s,
            ScalarOp::RSub => s - x,
            ScalarOp::Div => x / s,
            ScalarOp::RDiv => s / x,
            ScalarOp::Pow => x.powf(s),
            ScalarOp::Maximum => x.max(s),
            ScalarOp::Minimum => x.min(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::shared::UnaryOp;

    #[test]
    fn gelu_erf_matches_known_values() {
        // x · Φ(x) from the error function's table (Abramowitz & Stegun, table 7.1):
        // Φ(x) = (1 + erf(x/√2)) / 2.
        for (x, erf_x_over_sqrt2) in [
            (0.0f32, 0.0f64),
            (1.0, 0.682_689_492_137_085_9),
            (2.0, 0.954_499_736_103_641_6),
            (-1.0, -0.682_689_492_137_085_9),
        ] {
            let want = (f64::from(x) * 0.5 * (1.0 + erf_x_over_sqrt2)) as f32;
            let got = UnaryOp::GeluErf.apply(x);
            assert!(
                (got - want).abs() <= f32::EPSILON,
                "gelu({x}) = {got} vs {want}"
            );
        }
    }
}
