// FunctionRef: a non-owning reference to a callable.
#pragma once

#include <memory>
#include <type_traits>
#include <utility>

namespace mx {

// A non-owning reference to a callable (like LLVM's function_ref): no allocation, for the
// per-piece callbacks on the encode path. REQUIRES: the callable outlives the call.
template <typename Sig>
class FunctionRef;

template <typename R, typename... A>
class FunctionRef<R(A...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor)
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, A... a) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<A>(a)...);
        }) {}
  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};

}  // namespace mx
