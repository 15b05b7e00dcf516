#include "cli/completion.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tidepool {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

struct Values {
  std::string output = "table";
  std::string server;
  std::string token_file;
  std::vector<std::string> files;
  bool all = false;
  int hidden = 0;
};

// A parser shaped like tidepool's: commands, a nested group, -o with its set, a file positional.
std::unique_ptr<CLI::App> example(Values& v) {
  auto app = std::make_unique<CLI::App>("example", "tp");
  app->set_version_flag("--version", "1");
  CLI::App* jobs = app->add_subcommand("jobs", "List jobs");
  jobs->add_option("-o,--output", v.output, "Output")->check(CLI::IsMember({"table", "wide"}));
  jobs->add_flag("--all", v.all, "Every job");
  jobs->add_option("--server", v.server, "Server URL");
  jobs->add_option("--hidden", v.hidden, "Not shown")->group("");
  CLI::App* submit = app->add_subcommand("submit", "Submit");
  submit->add_option("FILE", v.files, "Job specs");
  submit->add_option("--token-file", v.token_file, "Token file");
  CLI::App* token = app->add_subcommand("token", "Tokens");
  token->add_subcommand("list", "List tokens");
  token->add_subcommand("revoke", "Revoke one");
  return app;
}

TEST(CommandShapesTest, EveryCommandWithItsOptionsValuesAndFiles) {
  Values values;
  const auto app = example(values);
  const std::vector<CommandShape> shapes = command_shapes(*app);
  ASSERT_EQ(shapes.size(), 6U);  // tp, jobs, submit, token, token list, token revoke
  EXPECT_THAT(shapes[0].path, IsEmpty());
  EXPECT_THAT(shapes[0].subcommands, ElementsAre("jobs", "submit", "token"));
  EXPECT_THAT(shapes[1].path, ElementsAre("jobs"));
  EXPECT_EQ(shapes[1].summary, "List jobs");
  std::vector<std::string> names;
  for (const auto& flag : shapes[1].flags)
    names.insert(names.end(), flag.names.begin(), flag.names.end());
  EXPECT_THAT(names, ElementsAre("-h", "--help", "-o", "--output", "--all", "--server"));
  EXPECT_THAT(shapes[1].flags[1].choices, ElementsAre("table", "wide"));
  EXPECT_TRUE(shapes[1].flags[1].takes_value);
  EXPECT_FALSE(shapes[1].flags[2].takes_value);  // --all
  EXPECT_TRUE(shapes[1].flags[3].takes_value);   // --server
  EXPECT_FALSE(shapes[1].flags[3].file);
  EXPECT_FALSE(shapes[1].takes_files);
  EXPECT_TRUE(shapes[2].takes_files);        // submit FILE...
  EXPECT_TRUE(shapes[2].flags.back().file);  // --token-file
  EXPECT_THAT(shapes[4].path, ElementsAre("token", "list"));
  EXPECT_THAT(shapes[5].path, ElementsAre("token", "revoke"));
}

TEST(BashCompletionTest, WalksTheCommandsAndCompletesValues) {
  Values values;
  const auto app = example(values);
  const auto shapes = command_shapes(*app);
  const std::string script = bash_completion(shapes, "tp");
  EXPECT_THAT(script, HasSubstr("_tp() {"));
  EXPECT_THAT(script, HasSubstr("complete -o filenames -F _tp tp\n"));
  EXPECT_THAT(script,
              HasSubstr("'tp/jobs'|'tp/submit'|'tp/token'|'tp/token/list'|'tp/token/revoke')"));
  EXPECT_THAT(script,
              HasSubstr("'tp/jobs/-o'|'tp/jobs/--output') COMPREPLY=($(compgen -W 'table wide'"));
  EXPECT_THAT(script, HasSubstr("'tp/submit/--token-file') COMPREPLY=($(compgen -f"));
  EXPECT_THAT(script, HasSubstr("'tp/jobs/--server') COMPREPLY=(); return 0"));
  EXPECT_THAT(script, HasSubstr("'tp') words='jobs submit token -h --help --version' ;;"));
  EXPECT_THAT(script, HasSubstr("'tp/submit') words='-h --help --token-file'; files=1 ;;"));
  EXPECT_THAT(script, Not(HasSubstr("--hidden")));
  const std::string zsh = zsh_completion(shapes, "tp");
  EXPECT_THAT(zsh, HasSubstr("bashcompinit"));
  EXPECT_THAT(zsh, HasSubstr(script));
}

}  // namespace
}  // namespace tidepool
