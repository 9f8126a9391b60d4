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
            UnaryOp::GeluErf => 0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2)),
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

/// The error function, to f64 precision (Abramowitz & Stegun 7.1.26 is too coarse for a
/// reference; this uses the series for small |x| and a continued fraction otherwise).
pub fn erf(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let ax = x.abs();
    let r = if ax < 2.5 {
        // Maclaurin series: erf x = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1))
        let mut term = ax;
        let mut sum = ax;
        let x2 = ax * ax;
        let mut n = 0.0;
        while term.abs() > 1e-17 * sum.abs() {
            n += 1.0;
            term *= -x2 / n;
            sum += term / (2.0 * n + 1.0);
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        // erfc x = e^(-x²)/√π · 1/(x + 1/2/(x + 1/(x + 3/2/(x + 2/(x + …)))))
        let mut f = 0.0;
        for k in (1..60).rev() {
            f = (k as f64 / 2.0) / (ax + f);
        }
        1.0 - (-ax * ax).exp() / std::f64::consts::PI.sqrt() / (ax + f)
    };
    if x < 0.0 { -r } else { r }
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
    use super::erf;

    #[test]
    fn erf_matches_known_values() {
        // Values from a table of the error function (Abramowitz & Stegun, table 7.1).
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_877_813_046_5),
            (1.0, 0.842_700_792_949_714_9),
            (2.0, 0.995_322_265_018_952_7),
            (3.0, 0.999_977_909_503_001_4),
            (-1.0, -0.842_700_792_949_714_9),
        ] {
            assert!(
                (erf(x) - want).abs() < 1e-14,
                "erf({x}) = {} vs {want}",
                erf(x)
            );
        }
    }
}
