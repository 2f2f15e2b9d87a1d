# Training image: JAX with CUDA for `na-train fit` on a GPU (paper-sized configs).
# Build from the repository root:
#   docker build -f docker/training.Dockerfile -t neuralactuator:training .
# Run:
#   docker run --rm -it --gpus all -v $PWD/runs:/ws/runs neuralactuator:training \
#     na-train fit --config config/train/paper.yaml --nad runs/nad --out runs/train
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && apt-get install -y --no-install-recommends \
      software-properties-common cmake g++ make git \
 && add-apt-repository -y ppa:deadsnakes/ppa && apt-get update \
 && apt-get install -y --no-install-recommends python3.11 python3.11-venv python3.11-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /ws
COPY . /ws
# Wheels ROS (no /opt/ros here) plus the pinned list, then the CUDA build of the same jaxlib.
RUN NA_PYTHON=python3.11 ./scripts/bootstrap.sh \
 && .venv/bin/pip install --no-cache-dir "jax[cuda12]==0.10.2"

SHELL ["/bin/bash", "-c"]
ENTRYPOINT ["/bin/bash", "-c", "source /ws/.venv/na_env.sh && exec \"$@\"", "--"]
CMD ["bash"]
