#include "common/intrusive_list.h"

#include <vector>

#include <gtest/gtest.h>

namespace slip {
namespace {

struct Item {
  int id = 0;
  ListLink<Item> a, b;  // on two lists at once
};
using ListA = IntrusiveList<Item, &Item::a>;
using ListB = IntrusiveList<Item, &Item::b>;

template <typename L>
std::vector<int> Ids(const L& l) {
  std::vector<int> out;
  for (Item* i = l.front(); i != nullptr; i = L::Next(i)) out.push_back(i->id);
  return out;
}

TEST(IntrusiveList, KeepsInsertionOrderAndRemovesFromAnywhere) {
  Item items[4];
  ListA l;
  EXPECT_TRUE(l.empty());
  for (int i = 0; i < 4; ++i) {
    items[i].id = i;
    l.PushBack(&items[i]);
  }
  EXPECT_EQ(Ids(l), (std::vector<int>{0, 1, 2, 3}));
  l.Remove(&items[1]);  // middle
  EXPECT_EQ(Ids(l), (std::vector<int>{0, 2, 3}));
  l.Remove(&items[0]);  // head
  l.Remove(&items[3]);  // tail
  EXPECT_EQ(Ids(l), (std::vector<int>{2}));
  EXPECT_EQ(l.front(), &items[2]);
  EXPECT_EQ(l.back(), &items[2]);
  l.Remove(&items[2]);
  EXPECT_TRUE(l.empty());
  EXPECT_EQ(l.back(), nullptr);
  l.PushBack(&items[3]);  // reusable after removal
  EXPECT_EQ(Ids(l), (std::vector<int>{3}));
}

TEST(IntrusiveList, AnElementCanBeOnTwoListsIndependently) {
  Item items[3];
  ListA a;
  ListB b;
  for (int i = 0; i < 3; ++i) {
    items[i].id = i;
    a.PushBack(&items[i]);
  }
  b.PushBack(&items[2]);
  b.PushBack(&items[0]);
  a.Remove(&items[2]);
  EXPECT_EQ(Ids(a), (std::vector<int>{0, 1}));
  EXPECT_EQ(Ids(b), (std::vector<int>{2, 0}));
}

TEST(IntrusiveList, RemovingWhileWalkingWithNextReadFirst) {
  Item items[5];
  ListA l;
  for (int i = 0; i < 5; ++i) {
    items[i].id = i;
    l.PushBack(&items[i]);
  }
  for (Item* i = l.front(); i != nullptr;) {
    Item* next = ListA::Next(i);
    if (i->id % 2 == 0) l.Remove(i);
    i = next;
  }
  EXPECT_EQ(Ids(l), (std::vector<int>{1, 3}));
}

}  // namespace
}  // namespace slip
