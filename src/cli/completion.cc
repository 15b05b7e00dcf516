#include "cli/completion.h"

#include <algorithm>
#include <cctype>

namespace tidepool {
namespace {

bool shell_safe(std::string_view word) {
  return !word.empty() && std::ranges::all_of(word, [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_' || c == '.';
  });
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// The values of a CLI::IsMember check, which CLI11 writes into the type name as "TEXT:{a,b,c}".
std::vector<std::string> choices_of(const std::string& type_name) {
  const auto open = type_name.find('{');
  const auto close = type_name.find('}', open);
  if (open == std::string::npos || close == std::string::npos) return {};
  std::vector<std::string> out;
  std::string_view rest(type_name.data() + open + 1, close - open - 1);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    if (shell_safe(item)) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

// A file is read where the option checks for an existing file (type "...:FILE"), or its name or
// type says FILE ("--token-file", submit's FILE...).
bool reads_file(const CLI::Option& option) {
  const std::string type = upper(option.get_type_name());
  return type.find("FILE") != std::string::npos ||
         upper(option.get_name()).find("FILE") != std::string::npos;
}

void add_shapes(const CLI::App& app, const std::vector<std::string>& path,
                std::vector<CommandShape>& out) {
  CommandShape shape;
  shape.path = path;
  shape.summary = app.get_description();
  const auto subcommands = app.get_subcommands(
      [](const CLI::App* sub) { return !sub->get_name().empty() && !sub->get_group().empty(); });
  for (const CLI::App* sub : subcommands) {
    if (shell_safe(sub->get_name())) shape.subcommands.push_back(sub->get_name());
  }
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_group().empty()) continue;  // hidden
    if (!option->nonpositional()) {
      shape.takes_files = shape.takes_files || reads_file(*option);
      continue;
    }
    CommandShape::Flag flag;
    for (const std::string& name : option->get_snames()) {
      if (shell_safe(name)) flag.names.push_back("-" + name);
    }
    for (const std::string& name : option->get_lnames()) {
      if (shell_safe(name)) flag.names.push_back("--" + name);
    }
    if (flag.names.empty()) continue;
    flag.takes_value = option->get_expected_max() > 0;
    if (flag.takes_value) {
      flag.choices = choices_of(option->get_type_name());
      flag.file = flag.choices.empty() && reads_file(*option);
    }
    shape.flags.push_back(std::move(flag));
  }
  out.push_back(std::move(shape));
  for (const CLI::App* sub : subcommands) {
    if (!shell_safe(sub->get_name())) continue;
    std::vector<std::string> below = path;
    below.push_back(sub->get_name());
    add_shapes(*sub, below, out);
  }
}

std::string joined_words(const std::vector<std::string>& words, std::string_view separator) {
  std::string out;
  for (const std::string& word : words) {
    if (!out.empty()) out += separator;
    out += word;
  }
  return out;
}

// "tidepool/token/list": the key of a command in the script's case statements.
std::string key_of(std::string_view program, const std::vector<std::string>& path) {
  std::string key(program);
  for (const std::string& word : path) key += "/" + word;
  return key;
}

std::string function_name(std::string_view program) {
  std::string name = "_";
  for (char c : program) name += std::isalnum(static_cast<unsigned char>(c)) != 0 ? c : '_';
  return name;
}

}  // namespace

std::vector<CommandShape> command_shapes(const CLI::App& app) {
  std::vector<CommandShape> out;
  add_shapes(app, {}, out);
  return out;
}

std::string bash_completion(std::span<const CommandShape> shapes, std::string_view program) {
  const std::string function = function_name(program);
  std::string commands;  // the words that lead into a subcommand
  std::string values;    // what follows an option that takes a value
  std::string words;     // what a command offers at the cursor
  for (const CommandShape& shape : shapes) {
    const std::string key = key_of(program, shape.path);
    if (!shape.path.empty()) commands += (commands.empty() ? "'" : "|'") + key + "'";
    std::vector<std::string> offered = shape.subcommands;
    for (const CommandShape::Flag& flag : shape.flags) {
      offered.insert(offered.end(), flag.names.begin(), flag.names.end());
      if (!flag.takes_value) continue;
      std::string patterns;
      for (const std::string& name : flag.names) {
        patterns += (patterns.empty() ? "'" : "|'") + key + "/" + name + "'";
      }
      if (!flag.choices.empty()) {
        values += "    " + patterns + ") COMPREPLY=($(compgen -W '" +
                  joined_words(flag.choices, " ") + "' -- \"$cur\")); return 0 ;;\n";
      } else if (flag.file) {
        values += "    " + patterns + ") COMPREPLY=($(compgen -f -- \"$cur\")); return 0 ;;\n";
      } else {
        values += "    " + patterns + ") COMPREPLY=(); return 0 ;;\n";
      }
    }
    words += "    '" + key + "') words='" + joined_words(offered, " ") + "'" +
             (shape.takes_files ? "; files=1" : "") + " ;;\n";
  }
  std::string out = "# bash completion for " + std::string(program) + ", written by `" +
                    std::string(program) +
                    " completion bash`.\n"
                    "# Load it with: source <(" +
                    std::string(program) + " completion bash)\n";
  out += function + "() {\n";
  out += "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n";
  out += "  local path='" + std::string(program) + "' words='' files=0 i\n";
  out += "  for ((i = 1; i < COMP_CWORD; i++)); do\n";
  if (!commands.empty()) {
    out += "    case \"$path/${COMP_WORDS[i]}\" in\n";
    out += "      " + commands + ") path=\"$path/${COMP_WORDS[i]}\" ;;\n";
    out += "    esac\n";
  } else {
    out += "    :\n";
  }
  out += "  done\n";
  if (!values.empty()) out += "  case \"$path/$prev\" in\n" + values + "  esac\n";
  out += "  case \"$path\" in\n" + words + "  esac\n";
  out += "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n";
  out += "  if [[ $files == 1 && $cur != -* ]]; then COMPREPLY+=($(compgen -f -- \"$cur\")); fi\n";
  out += "  return 0\n";
  out += "}\n";
  out += "complete -o filenames -F " + function + " " + std::string(program) + "\n";
  return out;
}

std::string zsh_completion(std::span<const CommandShape> shapes, std::string_view program) {
  std::string out = "# zsh completion for " + std::string(program) + ", written by `" +
                    std::string(program) +
                    " completion zsh`.\n"
                    "# Load it with: source <(" +
                    std::string(program) +
                    " completion zsh)   (in ~/.zshrc)\n"
                    "(( $+functions[compdef] )) || { autoload -U +X compinit && compinit; }\n"
                    "autoload -U +X bashcompinit && bashcompinit\n";
  return out + bash_completion(shapes, program);
}

}  // namespace tidepool
