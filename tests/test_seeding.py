"""The seed derivations (ema_boundary.seeding): committed results were drawn from these exact values."""

from ema_boundary import seeding


def test_recall_streams_keep_their_values() -> None:
    # 1_000_003 * stream + seed: train 1, selection 2, evaluation 3 (the evaluation stream ignores the seed)
    assert seeding.recall_train_seed(0) == 1_000_003
    assert seeding.recall_train_seed(4) == 1_000_007
    assert seeding.recall_selection_seed(2) == 2_000_008
    assert seeding.recall_evaluation_seed() == 3_000_009
    assert seeding.recall_stream_seed(5, 3) == 3_000_014


def test_recall_streams_never_meet() -> None:
    seeds = range(50)
    streams = [{seeding.recall_train_seed(s) for s in seeds}, {seeding.recall_selection_seed(s) for s in seeds},
               {seeding.recall_evaluation_seed()}]
    assert not (streams[0] & streams[1]) and not (streams[0] | streams[1]) & streams[2]


def test_probe_seeds_keep_their_values() -> None:
    assert seeding.probe_seeds(0, 3) == [0, 1, 2]
    assert seeding.probe_seeds(21, 5) == [21000, 21001, 21002, 21003, 21004]


def test_window_tagger_seed_keeps_its_values() -> None:
    assert seeding.window_tagger_seed(0, 1) == 1
    assert seeding.window_tagger_seed(21000, 3) == 147003
