// A queue of work items served by a fixed set of threads (any world): the
// SquashFS server's block prefetcher and page pusher.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace rt::util {

template <class T>
class WorkQueue {
public:
  // `threads` workers call `fn` on each item, outside the queue's lock.
  WorkQueue(unsigned threads, std::function<void(const T&)> fn) : fn_(std::move(fn)) {
    for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  // Stops the workers once their current items are done; items still
  // queued are dropped.
  ~WorkQueue() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  bool serving() const { return !workers_.empty(); }

  void push(const std::vector<T>& items) {
    if (items.empty()) return;
    {
      std::lock_guard<std::mutex> g(mu_);
      queue_.insert(queue_.end(), items.begin(), items.end());
    }
    wake_.notify_all();
  }

  // The same, ahead of every item queued: the next to be served, in order.
  void push_front(const std::vector<T>& items) {
    if (items.empty()) return;
    {
      std::lock_guard<std::mutex> g(mu_);
      queue_.insert(queue_.begin(), items.begin(), items.end());
    }
    wake_.notify_all();
  }

  // Items waiting for a worker.
  size_t size() {
    std::lock_guard<std::mutex> g(mu_);
    return queue_.size();
  }

private:
  void work() {
    for (;;) {
      T item;
      {
        std::unique_lock<std::mutex> g(mu_);
        wake_.wait(g, [this] { return stop_ || !queue_.empty(); });
        if (stop_) return;
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      fn_(item);
    }
  }

  std::function<void(const T&)> fn_;
  std::mutex mu_;
  std::deque<T> queue_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<std::thread> workers_;  // last: started once the rest exists
};

}  // namespace rt::util
