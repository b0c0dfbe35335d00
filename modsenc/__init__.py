"""modsenc: modular multilingual sentence encoders."""

__version__ = "0.1.0"
