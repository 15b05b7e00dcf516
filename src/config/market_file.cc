#include "config/market_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>

#include "config/yaml_reader.h"
#include "core/tidal_window.h"

namespace tidepool {
namespace {

// Amortisation years are read with 6 decimals; this many micro-years make one month.
constexpr std::int64_t kMonthsPerYear = 12;
// Longer than any amortisation (the core accepts 240 months): bounds the parse.
constexpr std::int64_t kMaxAmortisationYears = 1000;
constexpr int kPueDecimals = 3;
// The longest time the file takes (a burst threshold or start-up delay; a period is at most a
// day).
constexpr Seconds kMaxDurationInFile = 365 * kSecondsPerDay;

// Where a value the core checks was read: the constructors' errors name their own fields
// ("pue", "bands[1].closes"), which are mapped back to the file with these.
struct Place {
  YAML::Node node;
  std::string path;
};
using Places = std::unordered_map<std::string, Place>;

// Reads one YAML tree into a MarketSpec, failing with the path of the first bad value.
class MarketReader : private YamlReader {
 public:
  using YamlReader::YamlReader;

  Result<MarketSpec> read(const YAML::Node& root) const;

 private:
  // The scalar text of a number, or "expected a number, got <kind>".
  Result<Micros> money(const YAML::Node& node, const std::string& path) const;
  Result<Ppm> ppm(const YAML::Node& node, const std::string& path) const;
  Result<std::int64_t> watts(const YAML::Node& node, const std::string& path) const;
  Result<std::int64_t> pue_milli(const YAML::Node& node, const std::string& path) const;
  Result<int> months_of_years(const YAML::Node& node, const std::string& path) const;
  Result<int> months(const YAML::Node& node, const std::string& path) const;
  Result<Seconds> period(const YAML::Node& node, const std::string& path) const;

  // Reads `key` of the map `fields` (read from `map` at `path`) with `parse` into `target` and
  // notes where it was under the core's name `core_field`; a missing key is left alone, or fails
  // when `must`.
  template <class Parse, class Target>
  Result<void> read_key(const Fields& fields, const YAML::Node& map, const std::string& path,
                        const std::string& key, bool must, Parse parse, Target& target,
                        Places& places, const std::string& core_field) const;

  // The core's error `e` at the place of its field (or at `map`, `path` when it names none read).
  std::unexpected<Error> core_error(const Error& e, const Places& places, const YAML::Node& map,
                                    const std::string& path, std::string_view strip = {}) const;

  Result<GpuCostInputs> read_model(const Entry& entry) const;
  Result<PriceSchedule> read_prices(const YAML::Node& node) const;
  Result<void> read_curve(const YAML::Node& node, const std::string& path, PriceSchedule& prices,
                          Places& places) const;
  Result<void> read_bands(const YAML::Node& node, const std::string& path, PriceSchedule& prices,
                          Places& places) const;
  Result<Budget> read_budget(const Entry& entry) const;
  Result<Seconds> duration(const YAML::Node& node, const std::string& path) const;
  Result<void> read_burst(const YAML::Node& node, MarketSpec& spec) const;
  Result<BurstOfferSpec> read_offer(const YAML::Node& node, const std::string& path,
                                    const std::string& provider) const;
};

Result<Micros> MarketReader::money(const YAML::Node& node, const std::string& path) const {
  auto text = number_text(node, path);
  if (!text) return std::unexpected(text.error());
  auto value = parse_money(*text, path);
  if (!value) return error_at(node, path, value.error().reason);
  return *value;
}

Result<Ppm> MarketReader::ppm(const YAML::Node& node, const std::string& path) const {
  auto text = number_text(node, path);
  if (!text) return std::unexpected(text.error());
  auto value = parse_ppm(*text, path);
  if (!value) return error_at(node, path, value.error().reason);
  return *value;
}

Result<std::int64_t> MarketReader::watts(const YAML::Node& node, const std::string& path) const {
  auto text = number_text(node, path);
  if (!text) return std::unexpected(text.error());
  const auto value = parse_decimal(*text, 0);
  if (!value) return error_at(node, path, "expected whole watts, got '" + *text + "'");
  return *value;  // the core bounds it; kDecimalTooLarge fails there
}

Result<std::int64_t> MarketReader::pue_milli(const YAML::Node& node,
                                             const std::string& path) const {
  auto text = number_text(node, path);
  if (!text) return std::unexpected(text.error());
  const auto value = parse_decimal(*text, kPueDecimals);
  if (!value) {
    return error_at(node, path,
                    "expected a number with up to 3 decimals, like 1.3, got '" + *text + "'");
  }
  // The core's message shows the value as a multiplier; keep absurd ones from reaching it.
  if (*value == kDecimalTooLarge) return error_at(node, path, "must be 1..5, got " + *text);
  return *value;
}

Result<int> MarketReader::months_of_years(const YAML::Node& node, const std::string& path) const {
  auto text = number_text(node, path);
  if (!text) return std::unexpected(text.error());
  auto micro_years = parse_micro_decimal(*text, path, kMaxAmortisationYears * kMicrosPerUnit);
  if (!micro_years) return error_at(node, path, micro_years.error().reason);
  const std::int64_t micro_months = *micro_years * kMonthsPerYear;
  if (micro_months % kMicrosPerUnit != 0) {
    return error_at(node, path,
                    "must come to whole months (years in steps of 0.25, like 3.5; or give "
                    "amortisation_months), got '" +
                        *text + "'");
  }
  return static_cast<int>(micro_months / kMicrosPerUnit);
}

Result<int> MarketReader::months(const YAML::Node& node, const std::string& path) const {
  auto text = number_text(node, path);
  if (!text) return std::unexpected(text.error());
  const auto value = parse_decimal(*text, 0);
  if (!value) return error_at(node, path, "expected whole months, got '" + *text + "'");
  // Past the core's bound either way; keeps the narrowing exact.
  return static_cast<int>(std::min<std::int64_t>(*value, kMaxAmortisationYears * kMonthsPerYear));
}

Result<Seconds> MarketReader::period(const YAML::Node& node, const std::string& path) const {
  auto seconds = duration(node, path);
  if (!seconds) return seconds;
  if (*seconds < 1 || *seconds > kSecondsPerDay) {
    return error_at(node, path, "must be 1 second to 1 day, got '" + node.Scalar() + "'");
  }
  return *seconds;
}

template <class Parse, class Target>
Result<void> MarketReader::read_key(const Fields& fields, const YAML::Node& map,
                                    const std::string& path, const std::string& key, bool must,
                                    Parse parse, Target& target, Places& places,
                                    const std::string& core_field) const {
  const auto node = fields.get(key);
  if (!node) {
    if (must) return std::unexpected(required(fields, map, path, key).error());
    return {};
  }
  const std::string where = path.empty() ? key : path + "." + key;
  auto value = (this->*parse)(*node, where);
  if (!value) return std::unexpected(value.error());
  target = *value;
  places[core_field] = {*node, where};
  return {};
}

std::unexpected<Error> MarketReader::core_error(const Error& e, const Places& places,
                                                const YAML::Node& map, const std::string& path,
                                                std::string_view strip) const {
  std::string_view reason = e.reason;
  if (!strip.empty() && reason.starts_with(strip)) reason.remove_prefix(strip.size());
  const auto it = places.find(e.field);
  if (it != places.end()) return error_at(it->second.node, it->second.path, std::string(reason));
  // A check of a default, or of several fields together: the map as a whole.
  return error_at(map, path, e.field.empty() ? std::string(reason) : e.message());
}

Result<GpuCostInputs> MarketReader::read_model(const Entry& entry) const {
  const std::string path = "models." + entry.name;
  const YAML::Node& map = entry.value;
  auto f =
      entry_fields(map, path,
                   {"purchase_price", "amortisation_years", "amortisation_months", "power_watts",
                    "pue", "electricity_per_kwh", "operations_per_year", "target_utilisation",
                    "on_demand_per_hour", "spot_per_hour", "spot_interruption"});
  if (!f) return std::unexpected(f.error());
  GpuCostInputs in;
  in.model = entry.name;
  Places places;
  using R = MarketReader;
  Result<void> ok = read_key(*f, map, path, "purchase_price", true, &R::money, in.purchase_price,
                             places, "purchase_price");
  if (ok && f->get("amortisation_years") && f->get("amortisation_months")) {
    return error_at(*f->get("amortisation_months"), path + ".amortisation_months",
                    "give amortisation_years or amortisation_months, not both");
  }
  if (ok) {
    ok = read_key(*f, map, path, "amortisation_years", false, &R::months_of_years,
                  in.amortisation_months, places, "amortisation_months");
  }
  if (ok && f->get("amortisation_months")) {
    ok = read_key(*f, map, path, "amortisation_months", false, &R::months, in.amortisation_months,
                  places, "amortisation_months");
  }
  if (ok) {
    ok = read_key(*f, map, path, "power_watts", true, &R::watts, in.power_watts, places,
                  "power_watts");
  }
  if (ok) ok = read_key(*f, map, path, "pue", false, &R::pue_milli, in.pue_milli, places, "pue");
  if (ok) {
    ok = read_key(*f, map, path, "electricity_per_kwh", true, &R::money, in.electricity_per_kwh,
                  places, "electricity_per_kwh");
  }
  if (ok) {
    ok = read_key(*f, map, path, "operations_per_year", true, &R::money, in.operations_per_year,
                  places, "operations_per_year");
  }
  if (ok) {
    ok = read_key(*f, map, path, "target_utilisation", false, &R::ppm, in.target_utilisation,
                  places, "target_utilisation");
  }
  if (ok) {
    ok = read_key(*f, map, path, "on_demand_per_hour", false, &R::money, in.on_demand_per_hour,
                  places, "on_demand_per_hour");
  }
  if (ok) {
    ok = read_key(*f, map, path, "spot_per_hour", false, &R::money, in.spot_per_hour, places,
                  "spot_per_hour");
  }
  if (ok) {
    ok = read_key(*f, map, path, "spot_interruption", false, &R::ppm, in.spot_interruption, places,
                  "spot_interruption");
  }
  if (!ok) return std::unexpected(ok.error());
  auto checked = make_gpu_cost_inputs(in);
  if (!checked) {
    return core_error(checked.error(), places, map, path, "model " + entry.name + ": ");
  }
  return *checked;
}

Result<void> MarketReader::read_curve(const YAML::Node& node, const std::string& path,
                                      PriceSchedule& prices, Places& places) const {
  if (auto list = sequence(node, path); !list) return std::unexpected(list.error());
  places["curve"] = {node, path};
  prices.curve.clear();
  for (std::size_t i = 0; i < node.size(); ++i) {
    const YAML::Node point = node[i];
    const std::string at = fmt::format("{}[{}]", path, i);
    if (!point.IsSequence() || point.size() != 2) {
      return error_at(point, at,
                      "expected a point [utilisation, multiplier], got " + yaml_node_kind(point));
    }
    const std::string u_path = at + "[0]";
    const std::string m_path = at + "[1]";
    auto utilisation = ppm(point[0], u_path);
    if (!utilisation) return std::unexpected(utilisation.error());
    auto multiplier = ppm(point[1], m_path);
    if (!multiplier) return std::unexpected(multiplier.error());
    prices.curve.push_back({*utilisation, *multiplier});
    const std::string core = fmt::format("curve[{}]", i);
    places[core] = {point, at};
    places[core + ".utilisation"] = {point[0], u_path};
    places[core + ".multiplier"] = {point[1], m_path};
  }
  return {};
}

Result<void> MarketReader::read_bands(const YAML::Node& node, const std::string& path,
                                      PriceSchedule& prices, Places& places) const {
  if (auto list = sequence(node, path); !list) return std::unexpected(list.error());
  for (std::size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const std::string at = fmt::format("{}[{}]", path, i);
    auto f = entry_fields(item, at, {"from", "to", "multiplier"});
    if (!f) return std::unexpected(f.error());
    TimeOfDayBand band;
    const std::string core = fmt::format("bands[{}]", i);
    places[core] = {item, at};
    for (const char* key : {"from", "to"}) {
      auto value = required(*f, item, at, key);
      if (!value) return std::unexpected(value.error());
      const bool closing = std::string_view(key) == "to";
      const std::string where = at + "." + key;
      auto seconds = time_of_day(*value, where, closing);
      if (!seconds) return std::unexpected(seconds.error());
      (closing ? band.closes : band.opens) = *seconds;
      places[core + (closing ? ".closes" : ".opens")] = {*value, where};
    }
    auto ok = read_key(*f, item, at, "multiplier", true, &MarketReader::ppm, band.multiplier,
                       places, core + ".multiplier");
    if (!ok) return ok;
    prices.bands.push_back(band);
  }
  return {};
}

Result<PriceSchedule> MarketReader::read_prices(const YAML::Node& node) const {
  const std::string path = "prices";
  auto f = entry_fields(node, path,
                        {"period", "utilisation_curve", "time_of_day", "classes", "lender_share"});
  if (!f) return std::unexpected(f.error());
  PriceSchedule prices;
  Places places;
  using R = MarketReader;
  Result<void> ok =
      read_key(*f, node, path, "period", false, &R::period, prices.period, places, "period");
  if (ok) {
    ok = read_key(*f, node, path, "lender_share", false, &R::ppm, prices.lender_share, places,
                  "lender_share");
  }
  if (ok && f->get("utilisation_curve")) {
    ok = read_curve(*f->get("utilisation_curve"), path + ".utilisation_curve", prices, places);
  }
  if (ok && f->get("time_of_day")) {
    ok = read_bands(*f->get("time_of_day"), path + ".time_of_day", prices, places);
  }
  if (ok && f->get("classes")) {
    const YAML::Node classes = *f->get("classes");
    const std::string at = path + ".classes";
    auto c = entry_fields(classes, at, {"standard", "preemptible", "emergency"});
    if (!c) return std::unexpected(c.error());
    for (auto [key, target] :
         {std::pair{"standard", &prices.standard}, std::pair{"preemptible", &prices.preemptible},
          std::pair{"emergency", &prices.emergency}}) {
      if (ok) ok = read_key(*c, classes, at, key, false, &R::ppm, *target, places, key);
    }
  }
  if (!ok) return std::unexpected(ok.error());
  auto checked = make_price_schedule(prices);
  if (!checked) return core_error(checked.error(), places, node, path);
  return *checked;
}

Result<Budget> MarketReader::read_budget(const Entry& entry) const {
  const std::string path = "budgets." + entry.name;
  auto f = entry_fields(entry.value, path, {"quarterly", "soft_alert"});
  if (!f) return std::unexpected(f.error());
  Budget budget;
  Places places;
  Result<void> ok = read_key(*f, entry.value, path, "quarterly", true, &MarketReader::money,
                             budget.quarterly, places, "quarterly");
  if (ok) {
    ok = read_key(*f, entry.value, path, "soft_alert", false, &MarketReader::ppm, budget.soft_alert,
                  places, "soft_alert");
  }
  if (!ok) return std::unexpected(ok.error());
  auto checked = make_budget(budget);
  if (!checked) return core_error(checked.error(), places, entry.value, path);
  return *checked;
}

Result<Seconds> MarketReader::duration(const YAML::Node& node, const std::string& path) const {
  return YamlReader::duration(node, path, kMaxDurationInFile);
}

Result<BurstOfferSpec> MarketReader::read_offer(const YAML::Node& node, const std::string& path,
                                                const std::string& provider) const {
  auto f = entry_fields(node, path,
                        {"name", "model", "price_per_gpu_hour", "startup_delay", "max_gpus", "spot",
                         "interruption_per_hour"});
  if (!f) return std::unexpected(f.error());
  BurstOfferSpec offer;
  offer.provider = provider;
  for (const char* key : {"name", "model", "price_per_gpu_hour", "max_gpus"}) {
    if (auto ok = required(*f, node, path, key); !ok) return std::unexpected(ok.error());
  }
  auto name = text(*f->get("name"), path + ".name");
  if (!name) return std::unexpected(name.error());
  offer.name = *name;
  auto model = text(*f->get("model"), path + ".model");
  if (!model) return std::unexpected(model.error());
  offer.model = *model;
  Places places;
  Result<void> ok = read_key(*f, node, path, "price_per_gpu_hour", true, &MarketReader::money,
                             offer.price_per_gpu_hour, places, "price_per_gpu_hour");
  if (ok) {
    ok = read_key(*f, node, path, "startup_delay", false, &MarketReader::duration,
                  offer.startup_delay, places, "startup_delay");
  }
  if (ok) {
    ok = read_key(*f, node, path, "interruption_per_hour", false, &MarketReader::ppm,
                  offer.interruption_per_hour, places, "interruption_per_hour");
  }
  if (!ok) return std::unexpected(ok.error());
  const YAML::Node gpus = *f->get("max_gpus");
  const auto count = gpus.IsScalar() ? parse_decimal(gpus.Scalar(), 0) : std::nullopt;
  if (!count || *count < 1 || *count > 10'000'000) {
    return error_at(gpus, path + ".max_gpus",
                    "expected a whole number 1..10000000, got " + yaml_node_kind(gpus));
  }
  offer.max_gpus = *count;
  if (auto spot = f->get("spot")) {
    if (!spot->IsScalar() || (spot->Scalar() != "true" && spot->Scalar() != "false")) {
      return error_at(*spot, path + ".spot",
                      "expected true or false, got " + yaml_node_kind(*spot));
    }
    offer.spot = spot->Scalar() == "true";
  }
  // The core's checks, at this offer's keys.
  const BurstOffer core{.name = offer.name,
                        .provider = offer.provider,
                        .model = GpuModelId{0},
                        .spot = offer.spot,
                        .price_per_gpu_hour = offer.price_per_gpu_hour,
                        .startup_delay = offer.startup_delay,
                        .max_gpus = offer.max_gpus,
                        .interruption_per_hour = offer.interruption_per_hour};
  if (auto checked = validate_burst(std::span(&core, 1), BurstPolicy{}); !checked) {
    Error e = checked.error();
    if (e.field.starts_with("offers[0].")) e.field = e.field.substr(10);
    return core_error(e, places, node, path);
  }
  return offer;
}

Result<void> MarketReader::read_burst(const YAML::Node& node, MarketSpec& spec) const {
  const std::string path = "burst";
  auto f = entry_fields(node, path, {"threshold", "providers"});
  if (!f) return std::unexpected(f.error());
  if (auto threshold = f->get("threshold")) {
    auto seconds = duration(*threshold, path + ".threshold");
    if (!seconds) return std::unexpected(seconds.error());
    if (*seconds <= 0) return error_at(*threshold, path + ".threshold", "must be positive");
    spec.burst_threshold = *seconds;
  }
  std::unordered_map<std::string, std::string> providers, offers;
  if (auto list = f->get("providers")) {
    auto items = sequence(*list, path + ".providers");
    if (!items) return std::unexpected(items.error());
    for (std::size_t i = 0; i < items->size(); ++i) {
      const YAML::Node item = (*items)[i];
      const std::string at = fmt::format("{}.providers[{}]", path, i);
      auto p = entry_fields(item, at, {"name", "hook", "offers"});
      if (!p) return std::unexpected(p.error());
      BurstProviderSpec provider;
      auto name = unique_name(*p, item, at, "provider", providers);
      if (!name) return std::unexpected(name.error());
      provider.name = *name;
      if (auto hook = p->get("hook")) {
        auto command = text(*hook, at + ".hook");
        if (!command) return std::unexpected(command.error());
        provider.hook = *command;
      }
      auto offer_list = required(*p, item, at, "offers");
      if (!offer_list) return std::unexpected(offer_list.error());
      auto offer_items = sequence(*offer_list, at + ".offers");
      if (!offer_items) return std::unexpected(offer_items.error());
      for (std::size_t k = 0; k < offer_items->size(); ++k) {
        const YAML::Node o = (*offer_items)[k];
        const std::string offer_at = fmt::format("{}.offers[{}]", at, k);
        auto offer = read_offer(o, offer_at, provider.name);
        if (!offer) return std::unexpected(offer.error());
        if (auto seen = offers.find(offer->name); seen != offers.end()) {
          return error_at(
              o, offer_at + ".name",
              fmt::format("offer '{}' is already defined at {}", offer->name, seen->second));
        }
        offers.emplace(offer->name, offer_at);
        spec.burst_offers.push_back(std::move(*offer));
      }
      spec.burst_providers.push_back(std::move(provider));
    }
  }
  if (spec.burst_threshold && spec.burst_offers.empty()) {
    return error_at(node, path, "a threshold needs providers with offers to burst to");
  }
  return {};
}

Result<MarketSpec> MarketReader::read(const YAML::Node& root) const {
  if (root.IsNull()) return error_at(root, "", "the file is empty; expected models");
  auto top = entry_fields(root, "", {"currency", "models", "prices", "budgets", "burst"});
  if (!top) return std::unexpected(top.error());
  MarketSpec spec;
  if (auto currency = top->get("currency")) {
    auto label = text(*currency, "currency");
    if (!label) return std::unexpected(label.error());
    spec.currency = *label;
  }

  auto models = required(*top, root, "", "models");
  if (!models) return std::unexpected(models.error());
  auto model_entries = entries(*models, "models");
  if (!model_entries) return std::unexpected(model_entries.error());
  if (model_entries->empty()) return error_at(*models, "models", "the file has no models");
  for (const Entry& entry : *model_entries) {
    auto model = read_model(entry);
    if (!model) return std::unexpected(model.error());
    spec.models.push_back(std::move(*model));
  }

  if (auto prices = top->get("prices")) {
    auto schedule = read_prices(*prices);
    if (!schedule) return std::unexpected(schedule.error());
    spec.prices = std::move(*schedule);
  }

  if (auto budgets = top->get("budgets")) {
    auto budget_entries = entries(*budgets, "budgets");
    if (!budget_entries) return std::unexpected(budget_entries.error());
    for (const Entry& entry : *budget_entries) {
      auto budget = read_budget(entry);
      if (!budget) return std::unexpected(budget.error());
      spec.budgets.emplace_back(entry.name, *budget);
    }
  }

  if (auto burst = top->get("burst")) {
    if (auto ok = read_burst(*burst, spec); !ok) return std::unexpected(ok.error());
  }
  return spec;
}

}  // namespace

Result<MarketSpec> read_market_yaml(std::string_view text, const std::string& source) {
  return read_one_yaml_document(text, source, "market file", [&](const YAML::Node& root) {
    const MarketReader reader(source);
    return reader.read(root);
  });
}

Result<MarketSpec> load_market_yaml(const std::string& path) {
  auto text = read_file_text(path);
  if (!text) return std::unexpected(text.error());
  return read_market_yaml(*text, path);
}

const GpuCostInputs* find_market_model(const MarketSpec& market, std::string_view model) {
  for (const GpuCostInputs& inputs : market.models) {
    if (inputs.model == model) return &inputs;
  }
  return nullptr;
}

Result<std::vector<GpuCost>> gpu_costs_for(const MarketSpec& market,
                                           const GpuModelCatalog& catalog) {
  std::vector<GpuCost> costs;
  for (int m = 0; m < catalog.size(); ++m) {
    const std::string& name = catalog.name(GpuModelId{static_cast<std::uint32_t>(m)});
    const GpuCostInputs* inputs = find_market_model(market, name);
    if (inputs == nullptr) {
      return fail("models", fmt::format("GPU model {} of the pool is missing from the market "
                                        "file; add its TCO inputs under models",
                                        name));
    }
    costs.push_back(gpu_cost(*inputs));
  }
  return costs;
}

Result<std::vector<BurstOffer>> burst_offers_for(const MarketSpec& market,
                                                 GpuModelCatalog catalog) {
  std::vector<BurstOffer> offers;
  for (const BurstOfferSpec& o : market.burst_offers) {
    auto model = catalog.intern(o.model);
    if (!model) return fail("burst", fmt::format("offer {}: {}", o.name, model.error().message()));
    offers.push_back({.name = o.name,
                      .provider = o.provider,
                      .model = *model,
                      .spot = o.spot,
                      .price_per_gpu_hour = o.price_per_gpu_hour,
                      .startup_delay = o.startup_delay,
                      .max_gpus = o.max_gpus,
                      .interruption_per_hour = o.interruption_per_hour});
  }
  return offers;
}

Result<std::vector<Micros>> cost_bases_for(const MarketSpec& market,
                                           const GpuModelCatalog& catalog) {
  auto costs = gpu_costs_for(market, catalog);
  if (!costs) return std::unexpected(costs.error());
  std::vector<Micros> bases;
  bases.reserve(costs->size());
  for (const GpuCost& cost : *costs) bases.push_back(cost.cost_base);
  return bases;
}

}  // namespace tidepool
