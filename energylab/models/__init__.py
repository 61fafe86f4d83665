"""Full models built from energylab.modules: one module per model family."""
