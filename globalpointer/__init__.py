"""GlobalPointer named-entity recognition on PaddlePaddle."""
import warnings

# Noise that paddle prints on import and that no user can act on.
warnings.filterwarnings("ignore", message="No ccache found")
warnings.filterwarnings("ignore", message="Setuptools is replacing distutils")
