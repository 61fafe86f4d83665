"""energylab: attention mechanisms derived from energy functions.

The library behind the book. Dependencies point one way:
energies -> operators -> catalog / modules -> models -> experiments; viz and train serve notebooks.
"""
from energylab._setup import choose_device, seed_everything, setup_notebook

__all__ = ["choose_device", "seed_everything", "setup_notebook"]
__version__ = "0.1.0"
