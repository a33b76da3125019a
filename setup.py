"""vcbench: one JAX/Flax harness for CortexBench, G-VUE, RobustNav and The Colosseum."""
import setuptools

# Versions are the ones measured to install and run together on these machines
# (docs/design.md, "Where it runs"); the upper bounds keep a fresh setup from drifting.
INSTALL_REQUIRES = [
    "jax>=0.10.2,<0.11",
    "flax>=0.12.8,<0.13",
    "optax>=0.2.8",
    "orbax-checkpoint>=0.12.8,<0.13",
    "ml-collections>=1.1.0",
    "absl-py>=2.1",
    "numpy>=2.0",
    "safetensors>=0.4",
    "tqdm>=4.66",
    "pillow>=10",
    "matplotlib>=3.8",
    "scikit-image>=0.22",   # its bundled sample photographs texture vcbench-nav
    "scipy>=1.11",
    "grain==0.2.18",        # the frame input pipeline of MAE pre-training (data/frames.py)
]

EXTRAS = {
    # CPU simulators behind envs/host.py. metaworld 3.1.1 pins mujoco 3.3.0, with which pip
    # picks dm-control 1.0.28; rendering is headless through EGL (MUJOCO_GL=egl, Mesa).
    # gymnasium >= 1.1 for the vector envs' autoreset modes (envs/gym.py).
    "mujoco": [
        "metaworld==3.1.1",
        "mujoco==3.3.0",
        "mujoco-mjx==3.3.0",  # The batched path of the Colosseum factors (mjx.Model fields).
        "dm-control==1.0.28",
        "gymnasium>=1.1",
    ],
    # CortexBench's Adroit suite (pen, relocate) on MuJoCo: gymnasium-robotics' Adroit hands.
    "adroit": ["gymnasium-robotics==1.4.2"],
    # CortexBench's TriFinger suite (reach-cube, push-cube) on pybullet. It brings gym 0.26 (warns
    # on NumPy 2, harmless), pinocchio (`pin`) and opencv-python (the GUI build, alongside the
    # headless one of "test": both provide the same cv2). About 1.1 GB.
    "trifinger": ["trifinger-simulation==2.0.0"],
    # Results as DataFrames and parquet files (ResultStore.to_dataframe, notebooks/).
    "analysis": ["pandas>=2.2", "pyarrow>=15"],
    # Training curves as TensorBoard event files (metrics.TensorBoardWriter; off by default).
    "tensorboard": ["tensorboardX>=2.6"],
    # The parity tests against the PyTorch reference implementations and the PyTorch timing
    # benchmark. vcbench itself never imports torch: it reads .pth files with NumPy
    # (models/torch_pickle.py). torch 2.14.1 + torchvision 0.29.1 are the pair that imports on
    # these machines (a CUDA build that runs on the CPU).
    "parity": [
        "torch==2.14.1",
        "torchvision==0.29.1",
        "timm>=1.0.20",
        "open-clip-torch>=3.0",
        "transformers>=5,<6",   # The Flax RoBERTa's parity reference (models/roberta.py).
    ],
    # Sweeps across processes and hosts (launch/sweep.py): Ray, and submitit for Slurm.
    "sweep": ["ray>=2.60,<3", "submitit>=1.5"],
    # G-VUE (configs/gvue.py): the easy-VQA dataset ships its images and questions in its wheel;
    # `tokenizers` reads a user's RoBERTa vocabulary for the "roberta:<dir>" text encoder.
    "gvue": ["easy-vqa==1.0", "tokenizers>=0.22"],
    # The visual corruptions' parity tests run against the ImageNet-C package
    # `imagecorruptions` 1.1.2, installed by launch/setup.sh with --no-deps (it requires
    # the GUI build opencv-python; the headless build below provides the same cv2).
    # import-linter checks the layer contracts of .importlinter (tests/test_import_layers.py).
    # The notebooks run in a real kernel (nbclient, ipykernel), paired through jupytext.
    # The leaderboard page's test drives Debian's Chromium through selenium (launch/setup.sh
    # installs the browser; tests/reports/test_leaderboard_page.py).
    "test": ["pytest>=8", "pytest-xdist>=3.5", "opencv-python-headless>=4.8",
             "import-linter>=2.1,<3", "nbclient>=0.10", "nbformat>=5.10", "ipykernel>=6.29",
             "jupytext>=1.16", "dm-env>=1.6", "selenium>=4.20,<5"],
}

setuptools.setup(
    name="vcbench",
    version="0.1.0",
    description=__doc__,
    packages=setuptools.find_packages(include=["vcbench", "vcbench.*", "launch", "launch.*",
                                               "configs", "configs.*"]),
    python_requires=">=3.11",
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS,
)
