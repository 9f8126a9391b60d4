//! RoPE tables and rotation, and dequantization.

use super::*;

op_test!(rope_and_dequantize, |dev: &Device| {
    use gpukit_ops::quant::{QuantFormat, dequantize, dequantize_tensor, quantize};
    use gpukit_ops::rope::{RopeConfig, RopeLayout, RopeScaling, rope_inplace};
    let s = seed();
    for dt in FLOATS {
        for (rotary, scaling) in [
            (64usize, RopeScaling::None),
            (
                32,
                RopeScaling::Yarn {
                    factor: 4.0,
                    original_max_position: 4096,
                    beta_fast: 32.0,
                    beta_slow: 1.0,
                    attention_factor: None,
                },
            ),
        ] {
            let table = RopeConfig {
                rotary_dim: rotary,
                base: 10_000.0,
                scaling,
            }
            .table(0)
            .unwrap();
            let (tokens, heads, hd) = (5usize, 3usize, 64usize);
            for layout in [RopeLayout::RotateHalf, RopeLayout::AdjacentPairs] {
                let (x, xv) = input(&[tokens, heads, hd], dt, -1.0, 1.0, s, dev);
                let pos: Vec<i32> = vec![0, 1, 17, 4095, 100_000];
                let positions = Tensor::from_slice(&pos, &[tokens], dev).unwrap();
                let inv =
                    Tensor::from_slice(&table.inv_freq, &[table.inv_freq.len()], dev).unwrap();
                rope_inplace(&x, &positions, &inv, table.attention_scale, layout).unwrap();
                let mut want: Vec<f32> = xv.iter().map(|&v| v as f32).collect();
                let per_row: Vec<usize> = pos
                    .iter()
                    .flat_map(|&p| std::iter::repeat_n(p as usize, heads))
                    .collect();
                table.apply(&mut want, hd, &per_row, layout).unwrap();
                let want: Vec<f64> = want.into_iter().map(f64::from).collect();
                assert_close(
                    &format!("rope {dt} {layout:?} rotary {rotary}"),
                    &x.to_vec_f64().unwrap(),
                    &want,
                    tol(dt),
                );
            }
        }
    }
    let x: Vec<f32> = Tensor::rand(&[32 * 37], -3.0, 3.0, DType::F32, s, &Device::Cpu)
        .unwrap()
        .to_vec()
        .unwrap();
    for f in [QuantFormat::Q8_0, QuantFormat::Q4_0, QuantFormat::Q4_1] {
        let q = quantize(f, &x).unwrap();
        let mut want = vec![0f32; x.len()];
        dequantize(f, &q, &mut want).unwrap();
        let qt = Tensor::from_blocks(&q, f, &[37, 32], dev).unwrap();
        let got: Vec<f32> = dequantize_tensor(&qt, DType::F32)
            .unwrap()
            .to_vec()
            .unwrap();
        assert!(
            got.iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{f:?}: not bit-identical"
        );
        let bf = dequantize_tensor(&qt, DType::BF16)
            .unwrap()
            .to_vec_f64()
            .unwrap();
        assert_close(
            &format!("dequantize {f:?} to bf16"),
            &bf,
            &want.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
            1e-2,
        );
        assert!(Tensor::from_blocks(&q[..q.len() - 1], f, &[37, 32], dev).is_err());
    }
});
