#include "core/gpu_model.h"

#include <gtest/gtest.h>

#include <string>

namespace tidepool {
namespace {

TEST(GpuModelCatalogTest, InternGivesDenseIdsInOrderOfFirstAppearance) {
  GpuModelCatalog catalog;
  auto t4 = catalog.intern("T4");
  auto a100 = catalog.intern("A100");
  ASSERT_TRUE(t4.has_value());
  ASSERT_TRUE(a100.has_value());
  EXPECT_EQ(t4->value, 0U);
  EXPECT_EQ(a100->value, 1U);
  EXPECT_EQ(catalog.size(), 2);
  EXPECT_EQ(catalog.name(*t4), "T4");
  EXPECT_EQ(catalog.name(*a100), "A100");
}

TEST(GpuModelCatalogTest, InterningAKnownNameReturnsItsIdWithoutGrowing) {
  GpuModelCatalog catalog;
  ASSERT_TRUE(catalog.intern("T4"));
  ASSERT_TRUE(catalog.intern("A100"));
  auto again = catalog.intern("T4");
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->value, 0U);
  EXPECT_EQ(catalog.size(), 2);
}

TEST(GpuModelCatalogTest, NamesAreCaseSensitive) {
  GpuModelCatalog catalog;
  ASSERT_TRUE(catalog.intern("t4"));
  EXPECT_FALSE(catalog.find("T4").has_value());
}

TEST(GpuModelCatalogTest, FindReturnsIdOfKnownNameAndNothingForUnknown) {
  GpuModelCatalog catalog;
  ASSERT_TRUE(catalog.intern("V100M16"));
  ASSERT_TRUE(catalog.intern("V100M32"));
  auto found = catalog.find("V100M32");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->value, 1U);
  EXPECT_FALSE(catalog.find("P100").has_value());
  EXPECT_FALSE(catalog.find("V100").has_value());  // no prefix match
  EXPECT_EQ(catalog.size(), 2);                    // find never adds
}

TEST(GpuModelCatalogTest, EmptyNameIsRejected) {
  GpuModelCatalog catalog;
  auto id = catalog.intern("");
  ASSERT_FALSE(id.has_value());
  EXPECT_EQ(id.error().field, "gpu model");
  EXPECT_EQ(catalog.size(), 0);
}

TEST(GpuModelCatalogTest, AcceptsExactlyKMaxGpuModelsThenFails) {
  GpuModelCatalog catalog;
  for (int i = 0; i < kMaxGpuModels; ++i) {
    auto id = catalog.intern("M" + std::to_string(i));
    ASSERT_TRUE(id.has_value()) << i;
    EXPECT_EQ(id->value, static_cast<std::uint32_t>(i));
  }
  EXPECT_EQ(catalog.size(), kMaxGpuModels);

  auto extra = catalog.intern("one-too-many");
  ASSERT_FALSE(extra.has_value());
  EXPECT_EQ(extra.error().field, "gpu model");
  EXPECT_NE(extra.error().reason.find("64"), std::string::npos) << extra.error().reason;
  EXPECT_NE(extra.error().reason.find("one-too-many"), std::string::npos);
  EXPECT_EQ(catalog.size(), kMaxGpuModels);

  // A full catalog still answers for names it knows.
  auto known = catalog.intern("M63");
  ASSERT_TRUE(known.has_value());
  EXPECT_EQ(known->value, 63U);
}

TEST(ModelSetTest, DefaultAcceptsAnyModel) {
  const ModelSet set;
  EXPECT_TRUE(set.is_any());
  EXPECT_FALSE(set.is_none());
  EXPECT_TRUE(set.accepts(GpuModelId{0}));
  EXPECT_TRUE(set.accepts(GpuModelId{63}));
  EXPECT_EQ(set, ModelSet::any());
}

TEST(ModelSetTest, NoneAcceptsNothing) {
  const ModelSet set = ModelSet::none();
  EXPECT_FALSE(set.is_any());
  EXPECT_TRUE(set.is_none());
  EXPECT_FALSE(set.accepts(GpuModelId{0}));
  EXPECT_FALSE(set.accepts(GpuModelId{63}));
  EXPECT_NE(set, ModelSet::any());
}

TEST(ModelSetTest, AddRestrictsToTheAddedModels) {
  ModelSet set;
  set.add(GpuModelId{3});
  set.add(GpuModelId{63});
  EXPECT_FALSE(set.is_any());
  EXPECT_FALSE(set.is_none());
  EXPECT_TRUE(set.accepts(GpuModelId{3}));
  EXPECT_TRUE(set.accepts(GpuModelId{63}));
  EXPECT_FALSE(set.accepts(GpuModelId{0}));
  EXPECT_FALSE(set.accepts(GpuModelId{4}));
  EXPECT_EQ(set.bits(), (std::uint64_t{1} << 3) | (std::uint64_t{1} << 63));
}

TEST(ParseModelSetTest, EmptySpecAcceptsAny) {
  GpuModelCatalog catalog;
  auto set = parse_model_set("", catalog);
  ASSERT_TRUE(set.has_value());
  EXPECT_TRUE(set->is_any());
  EXPECT_EQ(catalog.size(), 0);
}

TEST(ParseModelSetTest, AlternativesJoinedByBar) {
  GpuModelCatalog catalog;
  ASSERT_TRUE(catalog.intern("T4"));
  ASSERT_TRUE(catalog.intern("A100"));
  ASSERT_TRUE(catalog.intern("P100"));
  auto set = parse_model_set("P100|T4", catalog);
  ASSERT_TRUE(set.has_value());
  EXPECT_FALSE(set->is_any());
  EXPECT_TRUE(set->accepts(GpuModelId{0}));   // T4
  EXPECT_FALSE(set->accepts(GpuModelId{1}));  // A100
  EXPECT_TRUE(set->accepts(GpuModelId{2}));   // P100
  EXPECT_EQ(catalog.size(), 3);
}

TEST(ParseModelSetTest, UnknownNamesAreInterned) {
  GpuModelCatalog catalog;
  ASSERT_TRUE(catalog.intern("T4"));
  auto set = parse_model_set("H100|T4|G3", catalog);
  ASSERT_TRUE(set.has_value());
  EXPECT_EQ(catalog.size(), 3);
  auto h100 = catalog.find("H100");
  auto g3 = catalog.find("G3");
  ASSERT_TRUE(h100.has_value());
  ASSERT_TRUE(g3.has_value());
  EXPECT_EQ(h100->value, 1U);
  EXPECT_EQ(g3->value, 2U);
  EXPECT_TRUE(set->accepts(*h100));
  EXPECT_TRUE(set->accepts(*g3));
  EXPECT_TRUE(set->accepts(GpuModelId{0}));
}

TEST(ParseModelSetTest, SingleNameAcceptsOnlyThatModel) {
  GpuModelCatalog catalog;
  ASSERT_TRUE(catalog.intern("T4"));
  auto set = parse_model_set("A10", catalog);
  ASSERT_TRUE(set.has_value());
  EXPECT_FALSE(set->accepts(GpuModelId{0}));
  EXPECT_TRUE(set->accepts(GpuModelId{1}));
}

TEST(ParseModelSetTest, EmptyAlternativesAreSkipped) {
  GpuModelCatalog catalog;
  auto set = parse_model_set("|T4||A100|", catalog);
  ASSERT_TRUE(set.has_value());
  EXPECT_EQ(catalog.size(), 2);
  EXPECT_EQ(set->bits(), 0b11U);
}

TEST(ParseModelSetTest, FailsWhenTheCatalogIsFull) {
  GpuModelCatalog catalog;
  for (int i = 0; i < kMaxGpuModels; ++i) ASSERT_TRUE(catalog.intern("M" + std::to_string(i)));
  auto set = parse_model_set("M1|brand-new", catalog);
  ASSERT_FALSE(set.has_value());
  EXPECT_EQ(set.error().field, "gpu model");
  EXPECT_EQ(catalog.size(), kMaxGpuModels);
}

TEST(DescribeModelSetTest, AnyNoneAndNamesInIdOrder) {
  GpuModelCatalog catalog;
  ASSERT_TRUE(catalog.intern("T4"));
  ASSERT_TRUE(catalog.intern("A100"));
  ASSERT_TRUE(catalog.intern("P100"));
  EXPECT_EQ(describe(ModelSet::any(), catalog), "any");
  EXPECT_EQ(describe(ModelSet::none(), catalog), "none");

  auto set = parse_model_set("P100|T4", catalog);
  ASSERT_TRUE(set.has_value());
  EXPECT_EQ(describe(*set, catalog), "T4|P100");  // id order, not spec order

  auto single = parse_model_set("A100", catalog);
  ASSERT_TRUE(single.has_value());
  EXPECT_EQ(describe(*single, catalog), "A100");
}

}  // namespace
}  // namespace tidepool
