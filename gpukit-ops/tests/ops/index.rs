//! Embedding lookup, index_select and gather.

use super::*;

op_test!(embedding_and_index_select, |dev: &Device| {
    let s = seed();
    for dt in [DType::F32, DType::F16, DType::BF16, DType::I64] {
        let (vocab, hidden) = (1000, 77);
        let (table, tv) = input(&[vocab, hidden], dt, -1.0, 1.0, s, dev);
        let idv: Vec<i32> = (0..19)
            .map(|i| ((i * 7919 + s as usize) % vocab) as i32)
            .collect();
        let ids = Tensor::from_slice(&idv, &[19], dev).unwrap();
        let rows = poisoned_any(&[19, hidden], dt, dev);
        ops::index_select_into(&table, 0, &ids, &rows).unwrap();
        let got = rows.to_vec_f64().unwrap();
        assert_eq!(
            got,
            ops::embedding(&table, &ids).unwrap().to_vec_f64().unwrap(),
            "{dt} embedding"
        );
        for (r, &id) in idv.iter().enumerate() {
            assert_eq!(
                &got[r * hidden..][..hidden],
                &tv[id as usize * hidden..][..hidden],
                "{dt} row {r}"
            );
        }
        // Views: rows 5.. of the table (dense, at an offset) and its transpose (strided).
        let tail = table.narrow(0, 5, vocab - 5).unwrap();
        let got = ops::embedding(&tail, &Tensor::from_slice(&[0i32, 7], &[2], dev).unwrap())
            .unwrap()
            .to_vec_f64()
            .unwrap();
        assert_eq!(
            &got[..hidden],
            &tv[5 * hidden..][..hidden],
            "{dt} offset view"
        );
        assert_eq!(
            &got[hidden..],
            &tv[12 * hidden..][..hidden],
            "{dt} offset view"
        );
        let cols = ops::index_select(
            &table.transpose(0, 1).unwrap(),
            1,
            &Tensor::from_slice(&[3i32], &[1], dev).unwrap(),
        )
        .unwrap()
        .to_vec_f64()
        .unwrap();
        assert_eq!(
            cols,
            tv[3 * hidden..][..hidden].to_vec(),
            "{dt} strided view"
        );
        // index_select along a middle axis with i64 ids.
        let (x, xv) = input(&[3, 10, 4], dt, -1.0, 1.0, s + 1, dev);
        let sel = Tensor::from_slice(&[9i64, 0, 9, 4], &[4], dev).unwrap();
        let out = poisoned_any(&[3, 4, 4], dt, dev);
        ops::index_select_into(&x, 1, &sel, &out).unwrap();
        let got = out.to_vec_f64().unwrap();
        for o in 0..3 {
            for (j, &id) in [9usize, 0, 9, 4].iter().enumerate() {
                for i in 0..4 {
                    assert_eq!(got[(o * 4 + j) * 4 + i], xv[(o * 10 + id) * 4 + i]);
                }
            }
        }
    }
    // gather along each axis of a 3-d tensor, i32 and i64 indices.
    for dt in [DType::F32, DType::F16, DType::BF16, DType::I32] {
        let shape = [3usize, 5, 4];
        let (x, xv) = input(&shape, dt, -1.0, 1.0, s + 5, dev);
        for axis in 0..3 {
            let mut ishape = shape;
            ishape[axis] = 7;
            let n: usize = ishape.iter().product();
            let ids: Vec<i64> = (0..n)
                .map(|t| ((t * 31 + s as usize) % shape[axis]) as i64)
                .collect();
            // i32 ids into contiguous f32 take the CPU's slice path; the rest the general one.
            let ids32: Vec<i32> = ids.iter().map(|&i| i as i32).collect();
            for index in [
                Tensor::from_slice(&ids, &ishape, dev).unwrap(),
                Tensor::from_slice(&ids32, &ishape, dev).unwrap(),
            ] {
                let out = poisoned_any(&ishape, dt, dev);
                ops::gather_into(&x, axis, &index, &out).unwrap();
                let got = out.to_vec_f64().unwrap();
                for t in 0..n {
                    let mut c = [
                        t / (ishape[1] * ishape[2]),
                        (t / ishape[2]) % ishape[1],
                        t % ishape[2],
                    ];
                    c[axis] = ids[t] as usize;
                    assert_eq!(
                        got[t],
                        xv[(c[0] * 5 + c[1]) * 4 + c[2]],
                        "gather {dt} axis {axis} at {t}, {} ids",
                        index.dtype()
                    );
                }
            }
        }
        let i32s = Tensor::from_slice(&[0i32, 4, 2], &[1, 3, 1], dev).unwrap();
        let small = x.narrow(0, 0, 1).unwrap().narrow(2, 0, 1).unwrap();
        let got = ops::gather(&small, 1, &i32s).unwrap().to_vec_f64().unwrap();
        assert_eq!(
            got,
            vec![xv[0], xv[16], xv[8]],
            "gather {dt} through a view"
        );
    }
    let (x, _) = input(&[2, 3], DType::F32, 0.0, 1.0, s, dev);
    let bad_shape = Tensor::from_slice(&[0i64; 4], &[2, 2], dev).unwrap();
    assert!(ops::gather(&x, 0, &bad_shape).is_err());
    let out_of_range = Tensor::from_slice(&[0i64, 1, 2, 3, 0, 1], &[2, 3], dev).unwrap();
    let e = ops::gather(&x, 0, &out_of_range).and_then(|t| t.to_vec_f64());
    assert!(e.unwrap_err().to_string().contains("out of range"));
    let out_of_range = Tensor::from_slice(&[0i32, 1, 2, 3, 0, -1], &[2, 3], dev).unwrap();
    let e = ops::gather(&x, 0, &out_of_range).and_then(|t| t.to_vec_f64());
    assert!(e.unwrap_err().to_string().contains("out of range"));

    // An id out of range is an error, never an out-of-bounds read.
    let (table, _) = input(&[10, 4], DType::F32, -1.0, 1.0, s, dev);
    let bad = Tensor::from_slice(&[3i32, 10], &[2], dev).unwrap();
    let r = ops::embedding(&table, &bad).and_then(|t| t.to_vec_f64());
    let e = r.unwrap_err().to_string();
    assert!(e.contains("out of range"), "{e}");
    // The device is usable afterwards and the error is reported once.
    let ok = Tensor::from_slice(&[1i32], &[1], dev).unwrap();
    assert_eq!(
        ops::embedding(&table, &ok)
            .unwrap()
            .to_vec_f64()
            .unwrap()
            .len(),
        4
    );
});
