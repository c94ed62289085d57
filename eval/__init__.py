"""Evaluation: lm-eval tasks (eval/tasks), model comparison (eval.compare), predictor/trace ablation
(eval.ablation), task data files (eval.make_data)."""
