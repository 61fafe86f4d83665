"""Trainable layers: one module per family of :mod:`energylab.forms`, each layer registered beside its definition.

======================  ======================================================  =================================
module                  layers                                                  forms
======================  ======================================================  =================================
``free_energy``         :class:`MultiHeadAttention`                             ``forms.free_energy``
``expressive``          :class:`ExpressiveAttention`                            ``forms.expressive``
``newton``              :class:`MHA2nd1st`, :class:`MHA2nd1stCorrected`         ``forms.newton``
``hyperspherical``      bi-softmax, sigmoid, kernel-linear attention; the       ``forms.hyperspherical``
                        three energy feedforwards
``hyperset``            :class:`HyperSETLayer` (looped: ``hyperset-*``)         ``forms.hyperspherical``
``recurrent``           :class:`ItrSA`, :class:`KuramotoLayer` (looped:         ``forms.recurrent``
                        ``itrsa*``, ``akorn*``)
``energy``              :func:`derive`: a layer from any energy (autograd)      any
``derived``             the catalog's forms and derived energies as looped      any
                        blocks (``form-*``, ``derived-*``)
``block``               :class:`PreNormBlock`, :class:`MLP`,
                        :class:`TransformerBlock` (looped: ``transformer``)
``sparse_hopfield``     :class:`HopfieldAttention`: queries read memories through  ``forms.sparse_hopfield``
                        softmax, sparsemax, entmax or normmax                   (and ``forms.hopfield``)
``registry``            :data:`LAYERS`: name -> builder(dim, heads, ffn_mult)
======================  ======================================================  =================================

Every attention or feedforward layer maps x (B, N, d) -> (B, N, d) and returns the *update* without the residual:
the model adds x (and any step size) itself. Layers are device- and dtype-agnostic (float32, bfloat16, float64);
the causal flag masks future tokens (True where attention is allowed: j ≤ i). Heads: H, d_h = d / H; multi-head
weights are (H, d_h, d) (book/notation.md): the rows h·d_h, ..., (h+1)·d_h − 1 of an ``nn.Linear`` weight (d, d)
are head h's map. Each layer's test checks it against its operator in :mod:`energylab.forms` on small float64
inputs, and :func:`energylab.catalog.register_layer` records which form a layer implements (the Atlas's table).
Looped layers (``forward(x, c)``, the input c injected at every iteration) register a builder by name in
:mod:`energylab.layers.registry`.

Fast kernels. The expressive, bi-softmax, sigmoid and Newton layers hand their work to the tiled kernels of
:mod:`energylab.kernels.attention` when :func:`energylab.kernels.enabled` says so (``with
kernels.reference_paths():`` turns them off for every layer); otherwise, and under torch.func transforms, they
compute the math on the page: the catalog operator, or for MHA2nd1st the row-blocked
:func:`energylab.forms.newton.newton_first_order_direction`.

Adding a layer: write it in its family's module (a new family: a new module here, found on disk and imported
below), register it there, test it against its form; nothing else in the library changes.
"""
# ruff: noqa: E402 - the families are imported first, in the Atlas's order; the names below come after
import importlib
import pkgutil

# Every family module is imported here, so importing any part of the package registers every layer (with the
# catalog, for the Atlas, and in the registry of looped layers). The first ones in the Atlas's table order; a new
# family module is found on disk and needs no line here.
FAMILIES = ("free_energy", "expressive", "newton", "hyperspherical", "block", "recurrent", "hyperset", "energy",
            "derived")
for _name in (*FAMILIES, *sorted(m.name for m in pkgutil.iter_modules(__path__)
                                 if m.name not in FAMILIES and not m.name.startswith("_") and m.name != "registry")):
    importlib.import_module(f"{__name__}.{_name}")
from energylab.layers.block import MLP, PreNormBlock, TransformerBlock
from energylab.layers.energy import EnergyLayer, FunctionEnergy, derive
from energylab.layers.expressive import ExpressiveAttention
from energylab.layers.free_energy import MultiHeadAttention
from energylab.layers.hyperset import HyperSETLayer
from energylab.layers.hyperspherical import (
    BiSoftmaxAttention,
    GatedEnergyFeedforward,
    KernelLinearAttention,
    ReLUEnergyFeedforward,
    SigmoidAttention,
    SoftmaxEnergyFeedforward,
)
from energylab.layers.newton import MHA2nd1st, MHA2nd1stCorrected
from energylab.layers.recurrent import ItrSA, KuramotoLayer
from energylab.layers.registry import LAYERS, layer_builder, layer_names, register_layer
from energylab.layers.sparse_hopfield import HopfieldAttention

__all__ = ["MultiHeadAttention", "ExpressiveAttention", "MHA2nd1st", "MHA2nd1stCorrected", "BiSoftmaxAttention",
           "SigmoidAttention", "KernelLinearAttention", "ReLUEnergyFeedforward", "SoftmaxEnergyFeedforward",
           "GatedEnergyFeedforward", "HopfieldAttention", "HyperSETLayer", "ItrSA", "KuramotoLayer", "EnergyLayer",
           "FunctionEnergy", "derive", "MLP", "PreNormBlock", "TransformerBlock", "LAYERS", "register_layer",
           "layer_names", "layer_builder"]
