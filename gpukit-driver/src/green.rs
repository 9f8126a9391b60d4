//! SM partitions: green contexts, each owning a disjoint set of a device's multiprocessors.
//!
//! A kernel launched on a stream of a partition runs only on that partition's SMs, so work in two
//! partitions cannot take each other's SMs (memory bandwidth and L2 stay shared). Wraps the
//! driver's green-context API (CUDA 12.4+): `cuDeviceGetDevResource`,
//! `cuDevSmResourceSplitByCount`, `cuDevResourceGenerateDesc`, `cuGreenCtxCreate`,
//! `cuGreenCtxStreamCreate`. Modules loaded in the device's primary context run in every
//! partition: a partition's streams belong to the primary context's address space.

use std::sync::Arc;

use cudarc::driver::sys;

use crate::device::{Device, driver_version};
use crate::error::{Error, Result, check};
use crate::stream::Stream;

/// The oldest driver with green contexts, as `(major, minor)` of its CUDA version.
const GREEN_CONTEXT_DRIVER: (i32, i32) = (12, 4);

/// A device's multiprocessors as the green-context API sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmResource {
    /// Multiprocessors available to partitions.
    pub sm_count: u32,
    /// The smallest partition, in SMs (8 on Hopper: SMs come in groups that share a TPC/GPC
    /// slice).
    pub min_partition_sms: u32,
    /// Partition sizes are multiples of this many SMs.
    pub alignment_sms: u32,
}

impl SmResource {
    /// `sms` rounded up to a size a partition can have (a multiple of [`SmResource::unit`]);
    /// `None` when that exceeds the device.
    pub fn round_up(&self, sms: u32) -> Option<u32> {
        let unit = self.unit();
        let n = sms.max(1).div_ceil(unit) * unit;
        (n <= self.sm_count).then_some(n)
    }

    /// The step partition sizes go in: the smallest partition, rounded up to the alignment.
    pub fn unit(&self) -> u32 {
        let align = self.alignment_sms.max(1);
        self.min_partition_sms.max(1).div_ceil(align) * align
    }
}

/// One SM partition of a device (a green context). Streams made from it
/// ([`SmPartition::new_stream`]) run their kernels on its SMs only.
///
/// Cheap to clone; the green context is destroyed when the last clone and the last of its
/// streams are dropped.
#[derive(Clone)]
pub struct SmPartition {
    inner: Arc<GreenContext>,
}

struct GreenContext {
    raw: sys::CUgreenCtx,
    device: Device,
    sm_count: u32,
}

// SAFETY: a `CUgreenCtx` is a driver handle; the calls made with it here (stream creation and
// destruction) are thread-safe driver calls that do not make it current on any thread.
unsafe impl Send for GreenContext {}
// SAFETY: as above; nothing here mutates through a shared reference.
unsafe impl Sync for GreenContext {}

impl Drop for GreenContext {
    fn drop(&mut self) {
        // SAFETY: `raw` was created by `cuGreenCtxCreate` and every stream of it holds an `Arc`
        // of this context, so none is left.
        let r = unsafe { sys::cuGreenCtxDestroy(self.raw) };
        self.device.record_err(r.result());
    }
}

/// A stream of a green context, destroyed (after its work) when the last [`Stream`] clone goes.
pub(crate) struct GreenStream {
    raw: sys::CUstream,
    partition: Arc<GreenContext>,
}

// SAFETY: a `CUstream` handle may be used and destroyed from any thread.
unsafe impl Send for GreenStream {}
// SAFETY: as above.
unsafe impl Sync for GreenStream {}

impl GreenStream {
    /// The SMs of the partition the stream belongs to.
    pub(crate) fn partition_sm_count(&self) -> u32 {
        self.partition.sm_count
    }
}

impl Drop for GreenStream {
    fn drop(&mut self) {
        self.partition.device.bind_in_drop();
        // SAFETY: `raw` came from `cuGreenCtxStreamCreate`; this is its only owner.
        let r = unsafe { sys::cuStreamDestroy_v2(self.raw) };
        self.partition.device.record_err(r.result());
    }
}

impl std::fmt::Debug for SmPartition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SmPartition({} SMs of {:?})",
            self.inner.sm_count, self.inner.device
        )
    }
}

impl Device {
    /// The SMs partitions can be cut from, when this driver and device can make them; the
    /// reason in words when not ([`Device::sm_resource`] with its error as text).
    pub fn green_context_support(&self) -> std::result::Result<SmResource, String> {
        self.sm_resource().map_err(|e| e.to_string())
    }

    /// The device's multiprocessors as partitions see them (`cuDeviceGetDevResource`).
    ///
    /// # Errors
    /// [`Error::Unsupported`] on a driver older than CUDA 12.4; [`Error::Cuda`] from the driver.
    pub fn sm_resource(&self) -> Result<SmResource> {
        self.require_green_contexts()?;
        let res = self.whole_sm_resource()?;
        // SAFETY: the driver filled an SM resource, so the union holds `sm`.
        let sm = unsafe { res.__bindgen_anon_1.sm };
        Ok(SmResource {
            sm_count: sm.smCount,
            min_partition_sms: sm.minSmPartitionSize.max(1),
            alignment_sms: sm.smCoscheduledAlignment.max(1),
        })
    }

    /// Splits the device's SMs into partitions of (at least) `sm_counts[i]` SMs each, in order,
    /// plus one more partition of every SM left over (absent when none is left). Each count is
    /// rounded up to a size a partition can have ([`SmResource::round_up`]).
    ///
    /// The partitions are disjoint. Work outside any partition (streams of the primary context)
    /// may still run on every SM.
    ///
    /// # Errors
    /// [`Error::Unsupported`] without green contexts; [`Error::InvalidArgument`] when the counts
    /// (rounded) exceed the device or one is zero; [`Error::Cuda`] from the driver.
    pub fn partition_sms(&self, sm_counts: &[u32]) -> Result<Vec<SmPartition>> {
        let info = self.sm_resource()?;
        let mut rounded = Vec::with_capacity(sm_counts.len());
        for &n in sm_counts {
            let r = (n > 0).then(|| info.round_up(n)).flatten();
            rounded.push(r.ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "an SM partition of {n} SMs: this device has {} SMs, partitions of at least \
                     {} in steps of {}",
                    info.sm_count, info.min_partition_sms, info.alignment_sms
                ))
            })?);
        }
        let total: u32 = rounded.iter().sum();
        if total > info.sm_count {
            return Err(Error::InvalidArgument(format!(
                "SM partitions of {rounded:?} SMs (rounded to the device's granularity of {}) \
                 total {total}, more than the device's {}",
                info.alignment_sms, info.sm_count
            )));
        }
        // One split into groups of the smallest partition size; each partition is a run of
        // consecutive groups (a descriptor may combine resources of one split), the last one
        // every group left plus the split's remainder. One split keeps them all disjoint.
        let unit = info.unit();
        let whole = self.whole_sm_resource()?;
        let mut groups_made = info.sm_count / unit;
        // SAFETY: all-zero is a valid (empty) resource, filled by the driver below.
        let mut groups: Vec<sys::CUdevResource> =
            vec![unsafe { std::mem::zeroed() }; groups_made as usize];
        // SAFETY: as above.
        let mut remainder: sys::CUdevResource = unsafe { std::mem::zeroed() };
        // SAFETY: `groups` has room for `groups_made` results; the input is an SM resource.
        check("cuDevSmResourceSplitByCount", unsafe {
            sys::cuDevSmResourceSplitByCount(
                groups.as_mut_ptr(),
                &mut groups_made,
                &whole,
                &mut remainder,
                0,
                unit,
            )
        })?;
        groups.truncate(groups_made as usize);
        let mut out = Vec::with_capacity(rounded.len() + 1);
        let mut next = 0usize;
        for &n in &rounded {
            let take = (n / unit) as usize;
            let Some(run) = groups.get(next..next + take) else {
                return Err(Error::InvalidArgument(format!(
                    "the driver split the device into {groups_made} groups of {unit} SMs, too \
                     few for partitions of {rounded:?} SMs"
                )));
            };
            out.push(self.green_context(run.to_vec())?);
            next += take;
        }
        let mut rest: Vec<sys::CUdevResource> = groups[next..].to_vec();
        // SAFETY: `remainder` is an SM resource filled by the driver.
        if unsafe { remainder.__bindgen_anon_1.sm.smCount } > 0 {
            rest.push(remainder);
        }
        if !rest.is_empty() {
            out.push(self.green_context(rest)?);
        }
        Ok(out)
    }

    fn require_green_contexts(&self) -> Result<()> {
        let v = driver_version()?;
        if v < GREEN_CONTEXT_DRIVER {
            return Err(Error::Unsupported {
                what: "SM partitions (green contexts)".into(),
                needs: format!(
                    "a driver for CUDA {}.{} or newer",
                    GREEN_CONTEXT_DRIVER.0, GREEN_CONTEXT_DRIVER.1
                ),
                have: format!("driven by a CUDA {}.{} driver", v.0, v.1),
            });
        }
        Ok(())
    }

    fn whole_sm_resource(&self) -> Result<sys::CUdevResource> {
        self.bind()?;
        // SAFETY: all-zero is a valid value of this plain-data struct; the driver overwrites it.
        let mut res: sys::CUdevResource = unsafe { std::mem::zeroed() };
        // SAFETY: the driver is new enough (checked by the callers), the device handle is valid.
        check("cuDeviceGetDevResource", unsafe {
            sys::cuDeviceGetDevResource(
                self.inner.ctx.cu_device(),
                &mut res,
                sys::CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM,
            )
        })?;
        Ok(res)
    }

    /// A green context over `resources` (SM resources of one split).
    fn green_context(&self, mut resources: Vec<sys::CUdevResource>) -> Result<SmPartition> {
        // SAFETY: every element is an SM resource from the driver.
        let sm_count = resources
            .iter()
            .map(|r| unsafe { r.__bindgen_anon_1.sm.smCount })
            .sum();
        let mut desc: sys::CUdevResourceDesc = std::ptr::null_mut();
        // SAFETY: `resources.len()` valid resources in, a descriptor out.
        check("cuDevResourceGenerateDesc", unsafe {
            sys::cuDevResourceGenerateDesc(
                &mut desc,
                resources.as_mut_ptr(),
                resources.len() as u32,
            )
        })?;
        let mut raw: sys::CUgreenCtx = std::ptr::null_mut();
        // SAFETY: a descriptor the driver generated for this device.
        check("cuGreenCtxCreate", unsafe {
            sys::cuGreenCtxCreate(
                &mut raw,
                desc,
                self.inner.ctx.cu_device(),
                sys::CUgreenCtxCreate_flags::CU_GREEN_CTX_DEFAULT_STREAM as u32,
            )
        })?;
        Ok(SmPartition {
            inner: Arc::new(GreenContext {
                raw,
                device: self.clone(),
                sm_count,
            }),
        })
    }
}

impl SmPartition {
    /// The multiprocessors this partition owns.
    pub fn sm_count(&self) -> u32 {
        self.inner.sm_count
    }

    /// The device.
    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// Whether anything besides this handle holds the partition: a stream made from it, or
    /// another clone. A partition nobody else holds can be given up and its SMs re-split.
    pub fn is_shared(&self) -> bool {
        Arc::strong_count(&self.inner) > 1
    }

    /// A stream whose kernels run on this partition's SMs, with `priority` (see
    /// [`Device::stream_priority_range`]). It orders with other streams through events like any
    /// stream, and is destroyed when its last clone is dropped.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a priority outside the device's range; [`Error::Cuda`].
    pub fn new_stream(&self, priority: i32) -> Result<Stream> {
        let device = &self.inner.device;
        let range = device.stream_priority_range()?;
        if !range.contains(priority) {
            return Err(Error::InvalidArgument(format!(
                "stream priority {priority} is outside this device's range {}..={}",
                range.highest, range.lowest
            )));
        }
        device.bind()?;
        let mut raw: sys::CUstream = std::ptr::null_mut();
        // SAFETY: a live green context; CU_STREAM_NON_BLOCKING is the flag the call requires.
        check("cuGreenCtxStreamCreate", unsafe {
            sys::cuGreenCtxStreamCreate(
                &mut raw,
                self.inner.raw,
                sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
                priority,
            )
        })?;
        let owner = Arc::new(GreenStream {
            raw,
            partition: self.inner.clone(),
        });
        // SAFETY: `raw` is a valid stream of this device's primary context's address space and
        // `owner`, kept beside the wrapper in the `Stream`, destroys it only after the wrapper.
        let inner = unsafe { device.inner.ctx.wrap_borrowed_stream(raw) };
        Ok(Stream {
            inner,
            device: device.clone(),
            _green: Some(owner),
            window: None,
        })
    }
}
