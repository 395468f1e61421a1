"""The Python package strider, built by scikit-build: CMake builds libstrider (static, into the
extension, so that the wheel needs no library of strider's beside it) and the extension _strider,
and installs them as the CMake component 'python'; setuptools adds the pure Python files, the type
stubs and py.typed. The version is the C++ project's (CMakeLists.txt).

More CMake options: CMAKE_ARGS="-DSTRIDER_ENABLE_CUDA=OFF" pip install --no-build-isolation .
"""

import pathlib
import re

from skbuild import setup

SOURCE = pathlib.Path(__file__).resolve().parent
VERSION = re.search(r"project\(strider VERSION ([0-9.]+)", (SOURCE / "CMakeLists.txt").read_text()).group(1)

setup(
    name="strider",
    version=VERSION,
    description="MPI data pipeline for training on HPC clusters: the Loader and torch-style samplers",
    license="Apache-2.0",
    python_requires=">=3.8",
    install_requires=["numpy"],
    packages=["strider"],
    package_dir={"": "python"},
    package_data={"strider": ["py.typed", "*.pyi"]},
    cmake_install_dir="python",
    cmake_install_target="strider_python_install",
    cmake_args=["-DBUILD_SHARED_LIBS=OFF", "-DSTRIDER_BUILD_TESTS=OFF", "-DSTRIDER_BUILD_APPS=OFF",
                "-DSTRIDER_BUILD_PYTHON=ON", "-DSTRIDER_PYTHON_INSTALL_DIR=."],
)
