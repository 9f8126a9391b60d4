//! Operation codes passed to the kernels (the `#define`s in `cuda/*.cu` must match).

/// Binary elementwise operations (`OP_*` in `cuda/elementwise.cu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum BinaryOp {
    /// a + b
    Add = 0,
    /// a - b
    Sub = 1,
    /// a * b
    Mul = 2,
    /// a / b
    Div = 3,
    /// max(a, b) (IEEE fmax: a NaN operand is ignored)
    Maximum = 4,
    /// min(a, b) (IEEE fmin)
    Minimum = 5,
    /// a ^ b
    Pow = 6,
}

impl BinaryOp {
    /// Applies the operation in f32, as the kernel does.
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Maximum => a.max(b),
            BinaryOp::Minimum => a.min(b),
            BinaryOp::Pow => a.powf(b),
        }
    }
}

/// Unary elementwise operations (`U_*` in `cuda/elementwise.cu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum UnaryOp {
    /// -x
    Neg = 0,
    /// |x|
    Abs = 1,
    /// e^x
    Exp = 2,
    /// ln x
    Log = 3,
    /// √x
    Sqrt = 4,
    /// 1/√x
    Rsqrt = 5,
    /// sin x
    Sin = 6,
    /// cos x
    Cos = 7,
    /// tanh x
    Tanh = 8,
    /// 1 / (1 + e^-x)
    Sigmoid = 9,
    /// max(x, 0)
    Relu = 10,
    /// max(x, 0)² (So et al., "Primer", 2021)
    Relu2 = 11,
    /// x·Φ(x), exact erf form (Hendrycks & Gimpel 2016)
    GeluErf = 12,
    /// 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))), the tanh approximation
    GeluTanh = 13,
    /// x·sigmoid(x) (SiLU / Swish)
    Silu = 14,
    /// x²
    Square = 15,
    /// 1/x
    Recip = 16,
}

impl UnaryOp {
    /// Applies the operation in f32, as the CPU reference (computed in f64 and rounded).
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

/// Scalar operations: `x op s` or `s op x` (`S_*` in `cuda/elementwise.cu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ScalarOp {
    /// x + s
    Add = 0,
    /// x · s
    Mul = 1,
    /// x − s
    Sub = 2,
    /// s − x
    RSub = 3,
    /// x / s
    Div = 4,
    /// s / x
    RDiv = 5,
    /// x ^ s
    Pow = 6,
    /// max(x, s)
    Maximum = 7,
    /// min(x, s)
    Minimum = 8,
}

impl ScalarOp {
    /// Applies the operation in f32, as the kernel does.
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

/// Reductions (`R_*` in `cuda/reduce.cu`). Max and min propagate NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum ReduceOp {
    /// Σ
    Sum = 0,
    /// Σ / n
    Mean = 1,
    /// max
    Max = 2,
    /// min
    Min = 3,
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
