"""Chapter 10 (section 10.6): the committed forms run beside the Sudoku input-blind baseline. The baseline is recomputed
from the boards; the count of forms below it on cells is what the chapter states."""
from energylab.baselines import sudoku_baseline
from energylab.engine.committed import load_committed
from energylab.tasks.sudoku_harness import load_set


def test_seven_of_eleven_forms_stay_below_the_input_blind_baseline():
    results, _ = load_committed("forms", "quick")
    fc = results.config
    base = sudoku_baseline(load_set(fc["test_set"], "test", fc["n_test"], fc["size"], fc["data_seed"]),
                           load_set(fc["train_set"], "train", fc["n_train"], fc["size"], fc["data_seed"]))
    assert (round(base["cell"], 3), round(base["board"], 3)) == (0.733, 0.097)
    cells = {layer: results.final[f"{layer}/cell"] for layer in fc["layers"]}
    above = {layer for layer, v in cells.items() if v > base["cell"]}
    assert above == {"form-mha", "form-ea", "form-relu_ff", "form-softmax_ff"}
    assert len(cells) - len(above) == 7 and cells["derived-cauchy"] < base["cell"] - 0.3
