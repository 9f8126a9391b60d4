//! Analysis windows, as `scipy.signal.get_window(name, n, fftbins=True)` (periodic, the form
//! librosa's STFT uses) makes them, computed in f64 and rounded to f32.

use gpukit_ops::signal::{FftWindow, WindowFn};
use gpukit_ops::{Device, Tensor};

use crate::Result;

/// A window function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Window {
    /// Hann: 0.5 − 0.5·cos(2πn/N) (librosa's default).
    #[default]
    Hann,
    /// Hamming: 0.54 − 0.46·cos(2πn/N).
    Hamming,
    /// Blackman: 0.42 − 0.5·cos(2πn/N) + 0.08·cos(4πn/N).
    Blackman,
    /// All ones (scipy's "boxcar").
    Rectangular,
}

impl Window {
    /// The window's name as scipy and librosa spell it.
    pub fn name(self) -> &'static str {
        match self {
            Window::Hann => "hann",
            Window::Hamming => "hamming",
            Window::Blackman => "blackman",
            Window::Rectangular => "boxcar",
        }
    }

    /// The equivalent noise bandwidth in bins, `n·Σw² / (Σw)²`, as librosa tabulates it
    /// (`librosa.filters.window_bandwidth`): what sets a constant-Q filter's cut-off.
    pub fn bandwidth(self) -> f64 {
        match self {
            Window::Hann => 1.500_183_105_468_75,
            Window::Hamming => 1.362_945_532_035_034_8,
            Window::Blackman => 1.726_968_155_426_232_6,
            Window::Rectangular => 1.0,
        }
    }

    /// The window of that name (`hann`, `hamming`, `blackman`, `boxcar`/`rectangular`/`ones`).
    pub fn from_name(name: &str) -> Option<Window> {
        Some(match name.to_ascii_lowercase().as_str() {
            "hann" | "hanning" => Window::Hann,
            "hamming" => Window::Hamming,
            "blackman" => Window::Blackman,
            "boxcar" | "rectangular" | "ones" | "rect" => Window::Rectangular,
            _ => return None,
        })
    }

    /// The window function the FFT kernels compute.
    pub fn function(self) -> WindowFn {
        match self {
            Window::Hann => WindowFn::Hann,
            Window::Hamming => WindowFn::Hamming,
            Window::Blackman => WindowFn::Blackman,
            Window::Rectangular => WindowFn::Rectangular,
        }
    }

    /// The periodic window of `n` samples (period `n`, as for spectral analysis), in f64.
    pub fn values(self, n: usize) -> Vec<f64> {
        (0..n).map(|i| self.function().value(i, n)).collect()
    }

    /// The window of `win_length` samples centred in `n_fft` (as [`Window::padded`]), for the
    /// FFT ops to compute where they run.
    pub fn fft_window(self, win_length: usize, n_fft: usize) -> FftWindow<'static> {
        let length = win_length.min(n_fft);
        FftWindow::Function {
            function: self.function(),
            length,
            offset: (n_fft - length) / 2,
        }
    }

    /// The window of `win_length` samples centred in `n_fft` zeros (librosa's `pad_center`:
    /// `(n_fft − win_length) / 2` zeros before it), in f64.
    pub fn padded(self, win_length: usize, n_fft: usize) -> Vec<f64> {
        let mut w = vec![0.0; n_fft];
        let left = (n_fft - win_length.min(n_fft)) / 2;
        for (i, v) in self.values(win_length.min(n_fft)).into_iter().enumerate() {
            w[left + i] = v;
        }
        w
    }
}

/// Values rounded to f32 in a `[len]` tensor on `device`.
pub(crate) fn tensor(values: &[f64], device: &Device) -> Result<Tensor> {
    let v: Vec<f32> = values.iter().map(|&x| x as f32).collect();
    Ok(Tensor::from_slice(&v, &[v.len()], device)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_periodic_and_padded_to_the_centre() {
        let h = Window::Hann.values(4);
        assert!((h[0] - 0.0).abs() < 1e-15 && (h[2] - 1.0).abs() < 1e-15);
        assert!((h[1] - 0.5).abs() < 1e-15);
        assert_eq!(
            Window::Rectangular.padded(3, 8),
            [0., 0., 1., 1., 1., 0., 0., 0.]
        );
        assert!((Window::Hamming.values(8)[0] - 0.08).abs() < 1e-12);
        assert!((Window::Blackman.values(8)[4] - 1.0).abs() < 1e-12);
        assert_eq!(Window::from_name("HANN"), Some(Window::Hann));
        assert_eq!(Window::from_name("kaiser"), None);
    }
}
