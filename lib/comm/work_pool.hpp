// The Work handles a communicator has made, reused so that issuing a
// collective allocates nothing once the pool holds as many as are ever in
// flight at once (tests/alloc_audit.sh). A handle is free when only the
// pool holds it (its issuer has dropped the WorkPtr) and `free` accepts it.
// Not thread-safe: the communicator serialises take().
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace gpt {

template <typename T>
class WorkPool {
 public:
  // Makes n handles up front (and room for 2n), for a pool whose high-water
  // mark depends on timing: without it, a step that happens to have one
  // more in flight than any before allocates in the loop.
  template <typename Make>
  void fill(size_t n, Make make) {
    all_.reserve(2 * n);
    while (all_.size() < n) all_.emplace_back(make());
  }

  // A free handle, searched round-robin from after the last one taken, or
  // else make()'s new one, kept from then on.
  template <typename Free, typename Make>
  std::shared_ptr<T> take(Free free, Make make) {
    for (size_t i = 0; i < all_.size(); ++i) {
      const size_t k = (next_ + i) % all_.size();
      if (all_[k].use_count() == 1 && free(*all_[k])) {
        next_ = (k + 1) % all_.size();
        return all_[k];
      }
    }
    return all_.emplace_back(make());
  }

 private:
  std::vector<std::shared_ptr<T>> all_;
  size_t next_ = 0;  // where the next search starts
};

}  // namespace gpt
