

def test_the_simulator_view_of_a_model_has_the_models_variables():
    """The SBI engines' view (``Model.simulator_model``) and the Model's own describe the same variables, and an
    SBI engine's draws are those variables."""
    model = vector_model(params={"lam": st.gamma(2.0, scale=2.0), "w": st.dirichlet([1.0, 2.0, 3.0])})
    sim_view = model.simulator_model([120.5]).observation_model()
    view = model.observation_model([120.5])
    assert [(v.name, v.dims, v.coords) for v in sim_view.variables] == \
        [(v.name, v.dims, v.coords) for v in view.variables]
    assert sim_view.latent.capabilities == {SIMULATE} and sim_view.family == "counts"
    np.testing.assert_array_equal(sim_view.measurements[0].values, [120.5])
    draw = sim_view.prior.sample(np.random.default_rng(0))
    assert np.shape(draw["w"]) == (3,) and draw["w"].sum() == pytest.approx(1.0)
    post = dpposterior.infer(model, observed=[120.5], method="smc-abc", simulations=400, particles=40, seed=0)
    assert list(post.posterior) == ["lam", "w"] and post.dims == {"w": ["part"]} and post.iid
    assert post.coords == {"part": ["a", "b", "c"]}
