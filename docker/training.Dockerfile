# Training image: the ROS-free training tools (na-train, na-sim generate) with the CUDA build of JAX.
# No ROS inside: bags are read with rosbags, the na_msgs definitions come from the source tree.
# Build from the repository root:
#   docker build -f docker/training.Dockerfile -t neuralactuator:training .
# Run (the entry point is na-train):
#   docker run --rm --gpus all -v $PWD/runs:/runs neuralactuator:training \
#     fit --config paper --nad /runs/nad --out /runs/train
# That uses every GPU the container sees (data-parallel; --devices N for fewer). Several hosts: one container
# per host with --network host, the same shared --nad/--out, and
#   --coordinator HOST0:PORT --num-processes N --process-id I   (or --distributed under SLURM)
# (src/na_training/TRAINING.md, Scaling).
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && apt-get install -y --no-install-recommends software-properties-common \
 && add-apt-repository -y ppa:deadsnakes/ppa && apt-get update \
 && apt-get install -y --no-install-recommends python3.11 python3.11-venv \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /ws
COPY requirements.txt /ws/
RUN python3.11 -m venv /ws/.venv \
 && /ws/.venv/bin/pip install --no-cache-dir -r requirements.txt "jax[cuda12]==0.10.2"
COPY src /ws/src
RUN /ws/.venv/bin/pip install --no-cache-dir --no-deps \
      src/na_common src/na_description src/na_sim src/na_training
ENV PATH=/ws/.venv/bin:$PATH \
    NA_MSGS_DIR=/ws/src/na_msgs/msg

ENTRYPOINT ["na-train"]
CMD ["--help"]
