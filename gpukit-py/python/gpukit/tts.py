"""Text to speech with Piper's VITS voices, on the GPU or the CPU.

    import gpukit as gk
    voice = gk.tts.load()                  # en_US-joe-medium, fetched once into the cache
    audio = voice.speak("Hello from gpukit. This runs on the GPU.")   # a numpy array per sentence
    gk.audio.write_wav("hello.wav", np.concatenate(audio), voice.sample_rate)
    for audio in voice.stream("One sentence. Then the next."):   # each as soon as it is ready
        print(len(audio) / voice.sample_rate, "s")

Phonemes come from espeak-ng (a separate program, which must be installed). `voice.synthesize`
takes phoneme ids directly; `voice.trace` also returns every sub-network's output.
"""

from ._gpukit import SpeechStream, Voice
from ._gpukit import load_voice as load

__all__ = ["SpeechStream", "Voice", "load"]
