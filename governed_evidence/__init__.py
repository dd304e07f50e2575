"""governed-evidence: governed, cited access to policy documents and official statistics."""

__version__ = "0.1.0"

__all__ = ["__version__"]
