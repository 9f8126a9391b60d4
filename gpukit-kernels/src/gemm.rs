//! GEMM through cuBLASLt, deterministic: an explicit workspace per lane, and the algorithm chosen
//! once per (shape, dtype, layout, epilogue, alignment) and cached — never re-picked behind the
//! caller's back. Algorithms that reduce split-K partials in place with atomics are excluded.
//!
//! Row-major operands map onto column-major cuBLASLt by computing Dᵀ = Bᵀ·Aᵀ: the B buffer is
//! cuBLASLt's "A", the A buffer its "B", and the bias (one value per output column n) is then per
//! row of cuBLASLt's D, which is what its bias epilogues expect.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use cudarc::cublaslt::result as lt;
use cudarc::cublaslt::sys;
use gpukit_driver::{Device, DevicePtr, Stream};
use gpukit_mem::{DeviceBuffer, DevicePool};

use crate::{DType, Error, Result};

/// What to apply to the product before storing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Epilogue {
    /// Nothing.
    #[default]
    None,
    /// max(x, 0).
    Relu,
    /// GELU, tanh approximation (cuBLASLt's definition).
    GeluTanh,
}

/// How f32 matrices are multiplied. cuBLASLt's fast path uses TF32 tensor cores (10-bit
/// mantissa inputs); gpukit uses full f32 unless TF32 is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum F32Precision {
    /// IEEE f32 products and sums.
    #[default]
    Full,
    /// TF32 inputs, f32 accumulation (about 1e-3 relative error).
    Tf32,
}

/// How B is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BLayout {
    /// Row-major `[k, n]`.
    KN,
    /// Row-major `[n, k]`: a linear layer's weight (`y = x · Wᵀ`).
    NK,
}

/// A (batched) product `D[b] = A[b] · B[b]` with row-major `A [m, k]`, `B` per [`BLayout`] and
/// `D [m, n]`; batches are consecutive (strides m·k, k·n, m·n). With `shared_b`, every batch uses
/// the same B (stride 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmShape {
    /// Rows of A and D.
    pub m: usize,
    /// Columns of D.
    pub n: usize,
    /// The contracted dimension.
    pub k: usize,
    /// Number of batches (≥ 1).
    pub batch: usize,
    /// B's layout.
    pub b_layout: BLayout,
    /// One B for every batch.
    pub shared_b: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct PlanKey {
    shape: GemmShape,
    dtype: DType,
    epilogue: Epilogue,
    bias: bool,
    precision: F32Precision,
    alignment: u32,
}

/// Descriptors and the chosen algorithm of one plan; destroyed with it.
struct Plan {
    desc: sys::cublasLtMatmulDesc_t,
    la: sys::cublasLtMatrixLayout_t,
    lb: sys::cublasLtMatrixLayout_t,
    ld: sys::cublasLtMatrixLayout_t,
    algo: sys::cublasLtMatmulAlgo_t,
}

// SAFETY: the descriptors are plain heap objects of cuBLASLt, read-only once the plan is built;
// cuBLASLt allows them to be used from any thread.
unsafe impl Send for Plan {}
// SAFETY: as above.
unsafe impl Sync for Plan {}

impl Drop for Plan {
    fn drop(&mut self) {
        // SAFETY: each descriptor was created once by this plan and is destroyed once. Failures
        // can only leak host memory: ignored rather than panicking in a destructor.
        unsafe {
            let _ = lt::destroy_matrix_layout(self.la);
            let _ = lt::destroy_matrix_layout(self.lb);
            let _ = lt::destroy_matrix_layout(self.ld);
            let _ = lt::destroy_matmul_desc(self.desc);
        }
    }
}

struct Handle(sys::cublasLtHandle_t);

// SAFETY: a cuBLASLt handle may be used from several threads (cuBLASLt docs: handles are
// thread-safe for use with different streams; gpukit uses each provider's one stream).
unsafe impl Send for Handle {}
// SAFETY: as above.
unsafe impl Sync for Handle {}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: created once by `GemmProvider::new`, destroyed once.
        let _ = unsafe { lt::destroy_handle(self.0) };
    }
}

/// Workspace per provider (cuBLASLt's recommendation for Hopper is 32 MiB).
pub const WORKSPACE_BYTES: usize = 32 << 20;

/// cuBLASLt matrix products on one stream (one per lane), with its own workspace and plan cache.
pub struct GemmProvider {
    handle: Handle,
    device: Device,
    stream: Stream,
    workspace: DeviceBuffer,
    plans: Mutex<HashMap<PlanKey, Arc<Plan>>>,
    /// Held from setting a plan's bias pointer until the product is enqueued, and so also
    /// serialising use of the one workspace.
    launch: Mutex<()>,
}

impl std::fmt::Debug for GemmProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GemmProvider({:?})", self.stream)
    }
}

fn blas(call: &'static str) -> impl Fn(lt::CublasError) -> Error {
    move |e| Error::Blas {
        call,
        status: format!("{:?}", e.0),
    }
}

fn data_type(dt: DType) -> Result<sys::cudaDataType> {
    Ok(match dt {
        DType::F32 => sys::cudaDataType::CUDA_R_32F,
        DType::F16 => sys::cudaDataType::CUDA_R_16F,
        DType::BF16 => sys::cudaDataType::CUDA_R_16BF,
        other => {
            return Err(Error::Unsupported {
                op: "matmul",
                dtype: other,
            });
        }
    })
}

/// Sets one attribute from a value.
///
/// # Safety
/// `T` must be the attribute's documented type.
unsafe fn set_desc<T>(
    d: sys::cublasLtMatmulDesc_t,
    a: sys::cublasLtMatmulDescAttributes_t,
    v: &T,
) -> Result<()> {
    // SAFETY: `v` is a live value of the attribute's type (caller's contract).
    unsafe { lt::set_matmul_desc_attribute(d, a, (v as *const T).cast(), size_of::<T>()) }
        .map_err(blas("cublasLtMatmulDescSetAttribute"))
}

/// # Safety
/// `T` must be the attribute's documented type.
unsafe fn set_layout<T>(
    l: sys::cublasLtMatrixLayout_t,
    a: sys::cublasLtMatrixLayoutAttribute_t,
    v: &T,
) -> Result<()> {
    // SAFETY: as above.
    unsafe { lt::set_matrix_layout_attribute(l, a, (v as *const T).cast(), size_of::<T>()) }
        .map_err(blas("cublasLtMatrixLayoutSetAttribute"))
}

/// # Safety
/// `T` must be the attribute's documented type.
unsafe fn set_pref<T>(
    p: sys::cublasLtMatmulPreference_t,
    a: sys::cublasLtMatmulPreferenceAttributes_t,
    v: &T,
) -> Result<()> {
    // SAFETY: as above.
    unsafe { lt::set_matmul_pref_attribute(p, a, (v as *const T).cast(), size_of::<T>()) }
        .map_err(blas("cublasLtMatmulPreferenceSetAttribute"))
}

/// cuBLASLt's version number (`major·10000 + minor·100 + patch`) when the library loads, else
/// `None` (then [`GemmProvider::new`] fails with [`Error::NoBlas`]).
pub fn cublaslt_version() -> Option<usize> {
    // SAFETY: only tries to dlopen the library by its usual names.
    if !unsafe { sys::is_culib_present() } {
        return None;
    }
    // SAFETY: the library is loaded; cublasLtGetVersion takes nothing and only returns a number.
    Some(unsafe { sys::cublasLtGetVersion() })
}

impl GemmProvider {
    /// A provider on `stream` with a workspace from `pool`.
    ///
    /// # Errors
    /// [`Error::NoBlas`] without libcublasLt; memory errors for the workspace.
    pub fn new(pool: &DevicePool, stream: &Stream) -> Result<Self> {
        if cublaslt_version().is_none() {
            return Err(Error::NoBlas);
        }
        stream.device().make_current()?;
        let handle = Handle(lt::create_handle().map_err(blas("cublasLtCreate"))?);
        let workspace = pool.alloc(WORKSPACE_BYTES, stream)?;
        Ok(GemmProvider {
            handle,
            device: stream.device().clone(),
            stream: stream.clone(),
            workspace,
            plans: Mutex::new(HashMap::new()),
            launch: Mutex::new(()),
        })
    }

    /// The stream products run on.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Plans built so far (one per distinct shape/dtype/layout/epilogue/alignment).
    pub fn plans(&self) -> usize {
        self.plans.lock().map(|p| p.len()).unwrap_or(0)
    }

    /// `d = a · b (+ bias) then epilogue`, on the provider's stream, for `dtype` operands (f32
    /// accumulation). `bias` has n elements of `dtype`.
    ///
    /// # Safety
    /// The pointers must address device buffers of this device holding the sizes `shape` implies
    /// (batch·m·k for a, batch·k·n or k·n for b, batch·m·n for d, n for the bias), not written by
    /// other work until this product completes (order other streams against this one).
    ///
    /// # Errors
    /// [`Error::Unsupported`] for non-float dtypes; [`Error::InvalidArgument`] for empty or
    /// oversized shapes; [`Error::Blas`] from cuBLASLt (e.g. no algorithm for the case).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn matmul(
        &self,
        a: DevicePtr,
        b: DevicePtr,
        d: DevicePtr,
        bias: Option<DevicePtr>,
        shape: GemmShape,
        dtype: DType,
        epilogue: Epilogue,
        precision: F32Precision,
    ) -> Result<()> {
        let GemmShape { m, n, k, batch, .. } = shape;
        if m == 0 || n == 0 || k == 0 || batch == 0 {
            return Err(Error::InvalidArgument(format!("empty matmul {shape:?}")));
        }
        let alignment = [a.0, b.0, d.0, bias.map_or(256, |p| p.0)]
            .into_iter()
            .map(|p| 1u64 << p.trailing_zeros().min(8))
            .min()
            .unwrap_or(256) as u32;
        let key = PlanKey {
            shape,
            dtype,
            epilogue,
            bias: bias.is_some(),
            precision: if dtype == DType::F32 {
                precision
            } else {
                F32Precision::Full
            },
            alignment,
        };
        let plan = self.plan(key)?;
        let _launch = self
            .launch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.device.make_current()?;
        if let Some(bias) = bias {
            // SAFETY: BIAS_POINTER takes a device pointer (8 bytes); the launch lock keeps other
            // calls from changing it before this product is enqueued.
            unsafe {
                set_desc(
                    plan.desc,
                    sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                    &bias.0,
                )?
            };
        }
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the plan's descriptors match the shape; pointers are valid per this function's
        // contract; the workspace is this provider's, ordered on its stream; alpha/beta are host
        // f32 values (pointer mode host, scale type f32).
        unsafe {
            lt::matmul(
                self.handle.0,
                plan.desc,
                (&alpha as *const f32).cast(),
                (&beta as *const f32).cast(),
                b.0 as *const c_void,
                plan.la,
                a.0 as *const c_void,
                plan.lb,
                d.0 as *const c_void,
                plan.ld,
                d.0 as *mut c_void,
                plan.ld,
                &plan.algo,
                self.workspace.ptr().0 as *mut c_void,
                WORKSPACE_BYTES,
                self.stream.as_raw() as sys::cudaStream_t,
            )
        }
        .map_err(blas("cublasLtMatmul"))?;
        self.stream.launched()?;
        Ok(())
    }

    fn plan(&self, key: PlanKey) -> Result<Arc<Plan>> {
        let mut plans = self
            .plans
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(p) = plans.get(&key) {
            return Ok(p.clone());
        }
        self.device.make_current()?;
        let p = Arc::new(self.build(key)?);
        plans.insert(key, p.clone());
        Ok(p)
    }

    fn build(&self, key: PlanKey) -> Result<Plan> {
        use sys::cublasLtMatmulDescAttributes_t as D;
        use sys::cublasLtMatmulPreferenceAttributes_t as P;
        use sys::cublasLtMatrixLayoutAttribute_t as L;
        let GemmShape {
            m,
            n,
            k,
            batch,
            b_layout,
            shared_b,
        } = key.shape;
        let dt = data_type(key.dtype)?;
        let compute = match (key.dtype, key.precision) {
            (DType::F32, F32Precision::Tf32) => {
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32
            }
            _ => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        };
        let dim = |x: usize| {
            i64::try_from(x).map_err(|_| Error::InvalidArgument(format!("dimension {x} too large")))
        };
        let desc = lt::create_matmul_desc(compute, sys::cudaDataType::CUDA_R_32F)
            .map_err(blas("cublasLtMatmulDescCreate"))?;
        // cuBLASLt "A" is the B buffer, viewed column-major as Bᵀ [n, k].
        let (op_a, a_rows, a_cols, a_ld): (i32, usize, usize, usize) = match b_layout {
            BLayout::KN => (0, n, k, n),
            BLayout::NK => (1, k, n, k),
        };
        let make_plan = |la, lb, ld, algo| Plan {
            desc,
            la,
            lb,
            ld,
            algo,
        };
        let la = lt::create_matrix_layout(dt, a_rows as u64, a_cols as u64, dim(a_ld)?)
            .map_err(blas("cublasLtMatrixLayoutCreate"))?;
        let lb = lt::create_matrix_layout(dt, k as u64, m as u64, dim(k)?)
            .map_err(blas("cublasLtMatrixLayoutCreate"))?;
        let ld = lt::create_matrix_layout(dt, n as u64, m as u64, dim(n)?)
            .map_err(blas("cublasLtMatrixLayoutCreate"))?;
        let epilogue = match (key.epilogue, key.bias) {
            (Epilogue::None, false) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_DEFAULT,
            (Epilogue::None, true) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_BIAS,
            (Epilogue::Relu, false) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU,
            (Epilogue::Relu, true) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_RELU_BIAS,
            (Epilogue::GeluTanh, false) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU,
            (Epilogue::GeluTanh, true) => sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU_BIAS,
        };
        let op_b: i32 = 0;
        let batch_i =
            i32::try_from(batch).map_err(|_| Error::InvalidArgument(format!("{batch} batches")))?;
        let no_inplace_reduction = (sys::cublasLtReductionScheme_t::CUBLASLT_REDUCTION_SCHEME_NONE
            as u32)
            | (sys::cublasLtReductionScheme_t::CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE as u32)
            | (sys::cublasLtReductionScheme_t::CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE as u32);
        // SAFETY: every attribute gets a value of its documented type (i32 ops, u32 epilogue,
        // i32 batch count, i64 strides, u64 workspace bytes, u32 masks and alignments); the
        // descriptors were just created.
        unsafe {
            set_desc(desc, D::CUBLASLT_MATMUL_DESC_TRANSA, &op_a)?;
            set_desc(desc, D::CUBLASLT_MATMUL_DESC_TRANSB, &op_b)?;
            set_desc(desc, D::CUBLASLT_MATMUL_DESC_EPILOGUE, &(epilogue as u32))?;
            if key.bias {
                let zero: i64 = 0;
                set_desc(desc, D::CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &zero)?;
            }
            if batch > 1 {
                let elements = |a: usize, b: usize| {
                    a.checked_mul(b).ok_or_else(|| {
                        Error::InvalidArgument(format!("a batch stride of {a}×{b} elements"))
                    })
                };
                let strides = [
                    (la, if shared_b { 0 } else { dim(elements(k, n)?)? }),
                    (lb, dim(elements(m, k)?)?),
                    (ld, dim(elements(m, n)?)?),
                ];
                for (l, stride) in strides {
                    set_layout(l, L::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch_i)?;
                    set_layout(l, L::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride)?;
                }
            }
            let pref = lt::create_matmul_pref().map_err(blas("cublasLtMatmulPreferenceCreate"))?;
            let ws = WORKSPACE_BYTES as u64;
            let result = (|| {
                set_pref(pref, P::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws)?;
                set_pref(
                    pref,
                    P::CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                    &no_inplace_reduction,
                )?;
                for attr in [
                    P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                    P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                    P::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                ] {
                    set_pref(pref, attr, &key.alignment)?;
                }
                lt::get_matmul_algo_heuristic(self.handle.0, desc, la, lb, ld, ld, pref)
                    .map_err(blas("cublasLtMatmulAlgoGetHeuristic"))
            })();
            let _ = lt::destroy_matmul_pref(pref);
            match result {
                Ok(h) => Ok(make_plan(la, lb, ld, h.algo)),
                Err(e) => {
                    drop(make_plan(
                        la,
                        lb,
                        ld,
                        sys::cublasLtMatmulAlgo_t { data: [0; 8] },
                    ));
                    Err(e)
                }
            }
        }
    }
}
