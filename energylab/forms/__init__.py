"""The attention forms of the book, one module per family; importing this package registers every form.

Each family module holds its energies E(x; params) -> scalar, the operators they induce (−∇E, Newton steps,
projected steps), the samplers of valid instances and its ``register(...)`` calls into :mod:`energylab.catalog`:

- :mod:`~energylab.forms.free_energy`: paper 000, free energies and the attention of one gradient step
  (softmax, dot product, linear, multi-head);
- :mod:`~energylab.forms.newton`: paper 000, the Newton forms Att2nd, Att2nd1st, MHA2nd, MHA2nd-paper, MHA2nd1st,
  MHA2nd1st-corrected;
- :mod:`~energylab.forms.hopfield`: modern Hopfield retrieval (Ramsauer et al.);
- :mod:`~energylab.forms.expressive`: expressive attention (paper 001);
- :mod:`~energylab.forms.local`: local energies of bare self-attention (paper 002);
- :mod:`~energylab.forms.sphere`: the sphere interaction energy (Geshkovski et al.) and symmetric SA (paper 003);
- :mod:`~energylab.forms.hyperspherical`: Hyper-SET and its alternative energies (paper 004);
- :mod:`~energylab.forms.recurrent`: generalised symmetric self-attention (paper 003, Props. 4.1 and 4.2);
- :mod:`~energylab.forms.sparse_hopfield`: Hopfield–Fenchel–Young energies, sparsemax / entmax / normmax retrieval
  (Santos et al. 2024).

The import order below is the order of ``catalog.FORMS`` and of the Atlas table: the families of :data:`ORDER`
first, then any other module of this folder (sorted by name), so a new family module is found on disk and needs no
line here. Dependencies point one way: the families import :mod:`energylab.catalog`, never the reverse.
"""
import importlib
import pkgutil

from energylab.forms._common import heads_for

ORDER = ("free_energy", "newton", "hopfield", "expressive", "local", "sphere", "hyperspherical", "recurrent",
         "sparse_hopfield")
FAMILY_MODULES = (*ORDER, *sorted(m.name for m in pkgutil.iter_modules(__path__)
                                  if m.name not in ORDER and not m.name.startswith("_")))
for _name in FAMILY_MODULES:
    globals()[_name] = importlib.import_module(f"{__name__}.{_name}")

__all__ = [*FAMILY_MODULES, "heads_for"]
