// For the libFuzzer builds only (run_fuzz.sh force-includes it): clang++-14 cannot compile
// libstdc++ 12's <expected> (it lacks conditionally trivial special members, P0848), so this
// header provides the part of std::expected / std::unexpected that Tidepool's parsers use, and
// disables the library's own header. Never used by the CMake (GCC) builds.
#pragma once

#if defined(__clang__) && __cpp_concepts < 202002L && !defined(_GLIBCXX_EXPECTED)
#define _GLIBCXX_EXPECTED 1  // the include guard of libstdc++'s <expected>: skip it

#include <exception>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

namespace std {

template <class E>
class unexpected {
 public:
  template <class G = E>
  requires(!is_same_v<remove_cvref_t<G>, unexpected> &&
           is_constructible_v<E, G>) constexpr explicit unexpected(G&& error)
      : error_(std::forward<G>(error)) {}

  constexpr const E& error() const& noexcept { return error_; }
  constexpr E& error() & noexcept { return error_; }
  constexpr E&& error() && noexcept { return std::move(error_); }

 private:
  E error_;
};

template <class E>
unexpected(E) -> unexpected<E>;

template <class T, class E>
class expected;

// Whether a type is an expected or an unexpected (the value comparison takes neither).
template <class T>
struct is_expected_or_unexpected : false_type {};
template <class T, class E>
struct is_expected_or_unexpected<expected<T, E>> : true_type {};
template <class E>
struct is_expected_or_unexpected<unexpected<E>> : true_type {};

template <class E>
class bad_expected_access : public exception {
 public:
  const char* what() const noexcept override { return "bad access to std::expected"; }
};

template <class T, class E>
class expected {
 public:
  using value_type = T;
  using error_type = E;

  constexpr expected() requires is_default_constructible_v<T> : v_(in_place_index<0>) {}

  template <class U = T>
  requires(!is_same_v<remove_cvref_t<U>, expected> && !is_same_v<remove_cvref_t<U>, in_place_t> &&
           is_constructible_v<T, U>) constexpr explicit(!is_convertible_v<U, T>) expected(U&& value)
      : v_(in_place_index<0>, std::forward<U>(value)) {}

  template <class G>
  constexpr expected(const unexpected<G>& u) : v_(in_place_index<1>, u.error()) {}
  template <class G>
  constexpr expected(unexpected<G>&& u) : v_(in_place_index<1>, std::move(u).error()) {}

  [[nodiscard]] constexpr bool has_value() const noexcept { return v_.index() == 0; }
  constexpr explicit operator bool() const noexcept { return has_value(); }

  constexpr T& operator*() & { return *get_if<0>(&v_); }
  constexpr const T& operator*() const& { return *get_if<0>(&v_); }
  constexpr T&& operator*() && { return std::move(*get_if<0>(&v_)); }
  constexpr T* operator->() { return get_if<0>(&v_); }
  constexpr const T* operator->() const { return get_if<0>(&v_); }

  constexpr T& value() & {
    if (!has_value()) throw bad_expected_access<E>();
    return **this;
  }
  constexpr const T& value() const& {
    if (!has_value()) throw bad_expected_access<E>();
    return **this;
  }
  constexpr T&& value() && {
    if (!has_value()) throw bad_expected_access<E>();
    return std::move(**this);
  }
  template <class U>
  constexpr T value_or(U&& other) const& {
    return has_value() ? **this : static_cast<T>(std::forward<U>(other));
  }

  constexpr E& error() & { return *get_if<1>(&v_); }
  constexpr const E& error() const& { return *get_if<1>(&v_); }
  constexpr E&& error() && { return std::move(*get_if<1>(&v_)); }

  template <class T2, class E2>
  friend constexpr bool operator==(const expected& x, const expected<T2, E2>& y) {
    if (x.has_value() != y.has_value()) return false;
    return x.has_value() ? *x == *y : x.error() == y.error();
  }
  template <class T2>
  requires(!is_expected_or_unexpected<T2>::value) friend constexpr bool operator==(
      const expected& x, const T2& value) {
    return x.has_value() && *x == value;
  }
  template <class E2>
  friend constexpr bool operator==(const expected& x, const unexpected<E2>& e) {
    return !x.has_value() && x.error() == e.error();
  }

 private:
  variant<T, E> v_;
};

template <class E>
class expected<void, E> {
 public:
  using value_type = void;
  using error_type = E;

  constexpr expected() = default;
  template <class G>
  constexpr expected(const unexpected<G>& u) : error_(in_place, u.error()) {}
  template <class G>
  constexpr expected(unexpected<G>&& u) : error_(in_place, std::move(u).error()) {}

  [[nodiscard]] constexpr bool has_value() const noexcept { return !error_.has_value(); }
  constexpr explicit operator bool() const noexcept { return has_value(); }
  constexpr void operator*() const noexcept {}
  constexpr void value() const {
    if (!has_value()) throw bad_expected_access<E>();
  }

  constexpr E& error() & { return *error_; }
  constexpr const E& error() const& { return *error_; }
  constexpr E&& error() && { return std::move(*error_); }

 private:
  optional<E> error_;
};

}  // namespace std

#endif
