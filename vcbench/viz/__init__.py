"""Pictures of scenes, episodes, corruptions and models: galleries, episode strips, MAE looks.

Unlike `vcbench.reports`, which reads the result store only, these modules run simulators and
models to draw what they see. The command-line tools in `launch/` call them.
"""
