//! Complex tensors as the signal ops lay them out (`[.., 2]`: real, imaginary), composed from
//! elementwise ops: split, join, product and modulus.

use crate::ops;
use crate::tensor::Tensor;
use crate::{BinaryOp, Result, UnaryOp};

/// The real and imaginary parts `[..]` of complex values `[.., 2]` (views, no copy).
///
/// # Errors
/// [`crate::Error::Shape`] for a scalar.
pub fn complex_parts(z: &Tensor) -> Result<(Tensor, Tensor)> {
    let axis = z.rank().saturating_sub(1);
    Ok((
        z.narrow(axis, 0, 1)?.squeeze(axis)?,
        z.narrow(axis, 1, 1)?.squeeze(axis)?,
    ))
}

/// Complex values `[.., 2]` from their real and imaginary parts `[..]` (one shape).
///
/// # Errors
/// Shape, dtype and device errors of `concat`.
pub fn complex_from_parts(re: &Tensor, im: &Tensor) -> Result<Tensor> {
    let r = re.rank();
    ops::concat(&[&re.unsqueeze(r)?, &im.unsqueeze(r)?], r)
}

/// The complex product `a · b` of `[.., 2]` tensors (broadcasting as the binary ops do).
///
/// # Errors
/// Shape, dtype and device errors of the binary ops.
pub fn complex_mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let ((ar, ai), (br, bi)) = (complex_parts(a)?, complex_parts(b)?);
    let mul = |x: &Tensor, y: &Tensor| ops::binary(BinaryOp::Mul, x, y);
    let re = ops::binary(BinaryOp::Sub, &mul(&ar, &br)?, &mul(&ai, &bi)?)?;
    let im = ops::binary(BinaryOp::Add, &mul(&ar, &bi)?, &mul(&ai, &br)?)?;
    complex_from_parts(&re, &im)
}

/// The modulus `|z|` `[..]` of complex values `[.., 2]`, such as an STFT's.
///
/// # Errors
/// [`crate::Error::Shape`] for a scalar; dtype errors.
pub fn complex_abs(z: &Tensor) -> Result<Tensor> {
    let square = ops::unary(UnaryOp::Square, z)?;
    ops::unary(
        UnaryOp::Sqrt,
        &ops::sum(&square, z.rank().saturating_sub(1))?,
    )
}
