// IntrusiveList: a doubly linked list threaded through its elements, for
// hot paths that must not allocate (an endpoint's operations in flight, its
// backlog). An element may be on several lists at once, one ListLink member
// per list; it must be on a list at most once, and off every list before it
// is freed. Not thread-safe.
//
//   struct Op { ListLink<Op> by_deadline; ... };
//   IntrusiveList<Op, &Op::by_deadline> deadlines;
//   deadlines.PushBack(op);
//   for (Op* o = deadlines.front(); o != nullptr; o = deadlines.Next(o)) ...
//   deadlines.Remove(op);
#pragma once

namespace slip {

template <typename T>
struct ListLink {
  T* prev = nullptr;
  T* next = nullptr;
};

template <typename T, ListLink<T> T::*Link>
class IntrusiveList {
 public:
  bool empty() const { return head_ == nullptr; }
  T* front() const { return head_; }
  T* back() const { return tail_; }
  // The element after `t` (nullptr at the end). Read it before removing `t`.
  static T* Next(const T* t) { return (t->*Link).next; }

  void PushBack(T* t) {
    ListLink<T>& l = t->*Link;
    l.prev = tail_;
    l.next = nullptr;
    if (tail_ != nullptr) {
      (tail_->*Link).next = t;
    } else {
      head_ = t;
    }
    tail_ = t;
  }

  // REQUIRES: `t` is on this list.
  void Remove(T* t) {
    ListLink<T>& l = t->*Link;
    if (l.prev != nullptr) {
      (l.prev->*Link).next = l.next;
    } else {
      head_ = l.next;
    }
    if (l.next != nullptr) {
      (l.next->*Link).prev = l.prev;
    } else {
      tail_ = l.prev;
    }
    l.prev = l.next = nullptr;
  }

 private:
  T* head_ = nullptr;
  T* tail_ = nullptr;
};

}  // namespace slip
