// Row-major Eigen views over raw buffers, shared by the CPU ops.
#pragma once

#include <Eigen/Dense>

namespace gpt::cpu {

template <typename T>
using MatR = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MapR = Eigen::Map<MatR<T>>;
template <typename T>
using CMapR = Eigen::Map<const MatR<T>>;
// Views with a row stride larger than the width (one head inside qkv).
template <typename T>
using MapRS = Eigen::Map<MatR<T>, 0, Eigen::OuterStride<>>;
template <typename T>
using CMapRS = Eigen::Map<const MatR<T>, 0, Eigen::OuterStride<>>;
template <typename T>
using CVec = Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>;
template <typename T>
using Vec = Eigen::Map<Eigen::Matrix<T, 1, Eigen::Dynamic>>;
// A row as an array: coefficient-wise exp, max and sum in SIMD packets
// (Eigen's exp is vectorised; std::exp is a scalar libm call).
template <typename T>
using ArrMap = Eigen::Map<Eigen::Array<T, 1, Eigen::Dynamic>>;

}  // namespace gpt::cpu
