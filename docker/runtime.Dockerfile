# Runtime image: ROS 2 Jazzy + the NeuralActuator workspace + onnxruntime-gpu, for running the
# drivers, teleop, recorder and the estimator on a workstation with an NVIDIA GPU.
# Build from the repository root:
#   docker build -f docker/runtime.Dockerfile -t neuralactuator:runtime .
# Run (USB serial adapters of both arms passed through, host networking for DDS):
#   docker run --rm -it --gpus all --net=host --device=/dev/ttyUSB0 --device=/dev/ttyUSB1 \
#     -v $PWD/runs:/ws/runs neuralactuator:runtime
FROM ros:jazzy-ros-base

ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update && apt-get install -y --no-install-recommends \
      python3-venv python3-pip cmake g++ make && rm -rf /var/lib/apt/lists/*

WORKDIR /ws
COPY . /ws
# The bootstrap sees /opt/ros/jazzy and uses it (no ROS wheels). onnxruntime-gpu replaces the
# CPU wheel so the estimator can select the CUDA/TensorRT execution providers.
RUN NA_PYTHON=/usr/bin/python3 ./scripts/bootstrap.sh \
 && .venv/bin/pip install --no-cache-dir onnxruntime-gpu==1.32.0 \
 && .venv/bin/pip uninstall -y onnxruntime

SHELL ["/bin/bash", "-c"]
ENTRYPOINT ["/bin/bash", "-c", "source /ws/.venv/na_env.sh && exec \"$@\"", "--"]
CMD ["bash"]
