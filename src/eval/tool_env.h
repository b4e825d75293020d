// The world of `eval tools`: a small shop's store of accounts and orders, the tools an agent
// may call on it, and the scripted tasks it is judged on. In the spirit of τ²-bench (a policy,
// simulated tools over a database, success judged by the database's final state), written
// here from scratch and kept deterministic: the same calls always give the same results and
// the same final state.
//
// Store: accounts (id, name, email) and orders (id, account_id, item, total_cents, status
// pending|shipped|delivered|cancelled, refunded). Tools (JSON arguments, JSON text results;
// a bad call gets {"error": "..."} and changes nothing):
//   find_account_by_email {email}          -> the account
//   get_order {order_id}                   -> the order
//   list_orders {account_id}               -> the account's orders
//   cancel_order {order_id}                -> pending only; status becomes cancelled
//   refund_order {order_id}                -> delivered and not yet refunded only
//   update_email {account_id, new_email}   -> needs an '@'
// The tools do not enforce the policy's ownership rule (act only for the verified account):
// the agent must, as in τ²-bench, and a task checks it.
//
// A task: scripted user turns (the next is sent when the agent answers without a tool call),
// the expected final store (the initial one with the task's changes), strings its answers
// must contain, and whether it must refuse. Success = final store == expected, every required
// string in its answers (case-insensitive), and for a refusal task a refusal phrase in the
// last answer.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mx::eval {

struct Account {
  std::string id, name, email;
};

struct Order {
  std::string id, account_id, item;
  int total_cents = 0;
  std::string status;  // pending, shipped, delivered, cancelled
  bool refunded = false;
};

struct Store {
  std::map<std::string, Account> accounts;
  std::map<std::string, Order> orders;
  nlohmann::json ToJson() const;
  bool operator==(const Store& o) const { return ToJson() == o.ToJson(); }
};

// Every task starts from this store.
Store InitialStore();

// The tools' schemas as chat completions "tools" entries ({"type": "function", "function":
// {name, description, parameters}}).
nlohmann::json ToolSchemas();

// The policy every task's system prompt states.
std::string Policy();

// Runs one call on `store`. `arguments` is the JSON text the model produced; anything but an
// object with the right string fields is an error result, never a crash.
std::string RunTool(Store& store, const std::string& name, const std::string& arguments);

struct ToolTask {
  std::string id;
  std::string description;              // what it tests (logs and docs)
  std::vector<std::string> user_turns;  // scripted, in order
  Store expected;
  std::vector<std::string> required;  // substrings of the answers (case-insensitive)
  bool refusal = false;
};

// The fixed task set (10 tasks).
std::vector<ToolTask> ToolTasks();

struct Judgement {
  bool success = false;
  std::vector<std::string> reasons;  // why not: "state", "missing 'X'", "no refusal"
};

// answers: the agent's replies without tool calls, in order.
Judgement Judge(const ToolTask& task, const Store& final_store,
                const std::vector<std::string>& answers);

// True when `text` says no (cannot, unable, not allowed, ...).
bool IsRefusal(const std::string& text);

}  // namespace mx::eval
