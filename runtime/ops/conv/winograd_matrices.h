// Winograd F(m, r) transform matrices, built at compile time by the Toom-Cook
// construction from alpha = m + r - 1 points: the first alpha - 1 of
// {0, 1, -1, 1/2, -2}, and infinity. With M(x) = prod_j (x - p_j) over the
// finite points and f_j = prod_{l != j} (p_j - p_l):
//   G[j][k]  = p_j^k / f_j            (alpha x r; last row picks g's leading coefficient)
//   BT[j]    = coefficients of M(x) / (x - p_j)   (alpha x alpha; last row: M(x))
//   AT[i][j] = p_j^i                  (m x alpha; last column picks y's leading term)
// so that y = AT [ (G g G^T) .* (BT d BT^T) ] AT^T is the m x m correlation of
// an alpha x alpha tile d with an r x r filter g. tests/ops check all three uses.
#pragma once

namespace lockstep::ops::winograd {

template <int R, int Mo>
struct Matrices {
  static constexpr int kA = Mo + R - 1;
  double BT[kA][kA] = {};
  double G[kA][R] = {};
  double AT[Mo][kA] = {};
  // Transposes, so every transform is written as L * X * R^T.
  double B[kA][kA] = {};
  double GT[R][kA] = {};
  double A[kA][Mo] = {};
};

template <int R, int Mo>
constexpr Matrices<R, Mo> make_matrices() {
  constexpr int A = Mo + R - 1;
  double pts[A - 1] = {};
  // 0, 1, -1, then 1/2 and -2 rather than 2 and -2, as Barabasz et al. ("Error
  // analysis and improving the accuracy of Winograd convolution for deep neural
  // networks") suggest: for alpha = 6 (F(4x4, 3x3), F(2x2, 5x5)) the mixed pair
  // rounds 2-2.5x less, measured against im2col (tests/ops): F(4x4, 3x3) 4.4e-6
  // of the largest value against 1.2e-5 with 2, -2; F(2x2, 5x5) 3.3e-6 against 6.2e-6.
  constexpr double kPoints[] = {0.0, 1.0, -1.0, 0.5, -2.0};
  static_assert(A - 1 <= 5, "more interpolation points than chosen");
  for (int j = 0; j < A - 1; ++j) pts[j] = kPoints[j];
  Matrices<R, Mo> m;
  for (int j = 0; j < A - 1; ++j) {
    double f = 1.0;
    for (int l = 0; l < A - 1; ++l)
      if (l != j) f *= pts[j] - pts[l];
    double pk = 1.0;
    for (int k = 0; k < R; ++k, pk *= pts[j]) m.G[j][k] = pk / f;
    // Coefficients (increasing powers) of prod_{l != j} (x - p_l).
    double poly[A] = {1.0};
    int deg = 0;
    for (int l = 0; l < A - 1; ++l) {
      if (l == j) continue;
      for (int d = deg + 1; d > 0; --d) poly[d] = poly[d - 1] - pts[l] * poly[d];
      poly[0] = -pts[l] * poly[0];
      ++deg;
    }
    for (int d = 0; d < A; ++d) m.BT[j][d] = poly[d];
    double pi = 1.0;
    for (int i = 0; i < Mo; ++i, pi *= pts[j]) m.AT[i][j] = pi;
  }
  m.G[A - 1][R - 1] = 1.0;
  double poly[A + 1] = {1.0};
  for (int l = 0; l < A - 1; ++l) {
    for (int d = l + 1; d > 0; --d) poly[d] = poly[d - 1] - pts[l] * poly[d];
    poly[0] = -pts[l] * poly[0];
  }
  for (int d = 0; d < A; ++d) m.BT[A - 1][d] = poly[d];
  m.AT[Mo - 1][A - 1] = 1.0;
  for (int i = 0; i < A; ++i) {
    for (int j = 0; j < A; ++j) m.B[i][j] = m.BT[j][i];
    for (int k = 0; k < R; ++k) m.GT[k][i] = m.G[i][k];
    for (int k = 0; k < Mo; ++k) m.A[i][k] = m.AT[k][i];
  }
  return m;
}

}  // namespace lockstep::ops::winograd
