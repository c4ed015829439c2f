"""The HiF4 studies in miniature (docs/analysis.md, "Tiny-LLM studies").

A small Qwen2.5-shaped transformer (model.py) trained here on a seeded
arithmetic task (task.py), then studied with its linear layers' operands
fake-quantized through fp4emu.torch:

- pretrain.py       fp32 pre-training; writes the committed checkpoint data/tiny_llm/
- rollout_study.py  study 1: rollout precision decomposition (W4A16 / W16A4 / W4A4, ResQ, transforms)
- rl_study.py       study 2: GRPO fine-tuning with W4A4 rollouts (± Rollout-ResQ) and FP4 training
- fp4_pretrain_study.py  study 3: pre-training with all three GEMMs in FP4 (pure, + RHT, + RHT + SR)
- fp4_linear.py     the training precisions of studies 2 and 3 (fp4emu.torch.Fp4Linear underneath)

Run from the repository root with the built module on the path, e.g.

    PYTHONPATH=build/python /usr/bin/python3 -m studies.tiny_llm.rollout_study --out studies/results/tiny_llm
"""
