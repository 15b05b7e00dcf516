// `tidepool plan tco`: what a GPU-hour costs to own, per GPU model of a market file
// (config/market_file.h, core/gpu_cost.h), and how owning compares with renting.
//
//   tidepool plan tco --market FILE [--utilisation 0.3,0.5,0.7,0.9] [--model NAME ...]
//                     [--output table|csv|json]
//
// For each model (all of the file's, in file order, or those of --model, in the order given):
//   - the cost of one GPU per hour it exists: amortisation, power, operations, their sum (owned
//     per hour), and the cost base: owned per hour / target utilisation, the cost of a used
//     GPU-hour when the pool is used as planned (the internal market's prices start from it);
//   - for each --utilisation u: owned cost per used GPU-hour (owned per hour / u), the on-demand
//     price, spot's cost per useful hour (spot / (1 - spot_interruption)), and which is cheapest
//     (ties go to owning, then on demand);
//   - the break-even utilisations: owning is cheaper than on demand (spot per useful hour) above
//     owned per hour / that price; "never" when owning costs more even fully used.
// Spot capacity can be taken back at any time: it suits only preemptible work that checkpoints.
//
// Output: -o table (default) prints three tables with the amounts in money_text (2 decimals) and
// the file's currency label. -o csv prints one row per model and utilisation, amounts exact
// (exact_money_text), shares as decimals ("0.3"); a field is empty where the model has no such
// price, "never" for a break-even that does not exist. -o json prints {market, currency, models:
// [...]} with amounts as numbers in currency units; a price the model lacks is left out, a
// break-even that does not exist is null.
//
// Errors are printed as "error: <flag or file position>: <reason>" with exit status 1.
#pragma once

#include <CLI/CLI.hpp>

namespace tidepool {

// Adds the `tco` subcommand to `plan`; its exit status is written to `*exit_code`.
void add_plan_tco_command(CLI::App& plan, int* exit_code);

}  // namespace tidepool
